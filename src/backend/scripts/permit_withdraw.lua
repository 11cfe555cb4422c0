-- Semaphore withdraw: remove the permit of a stem that may have been granted but was never
-- delivered (see withdraw.lua for the lock's).
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
-- ARGV[1]  the token stem
-- ARGV[2]  the semaphore's release channel
-- ARGV[3]  the claim id that must still be the grant's last, or '' for none
--
-- Returns 1 withdrawn, 0 nothing of this stem (and claim) held.
if ARGV[3] ~= '' and redis.call('HGET', KEYS[2], 'claim:' .. ARGV[1]) ~= ARGV[3] then
  return 0
end
local prefix = ARGV[1] .. '.'
for _, token in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(token, 1, #prefix) == prefix then
    redis.call('ZREM', KEYS[1], token)
    redis.call('HDEL', KEYS[2], 'holder:' .. token, 'claim:' .. ARGV[1])
    if redis.call('EXISTS', KEYS[1]) == 0 then
      redis.call('DEL', KEYS[2])
    end
    redis.call('PUBLISH', ARGV[2], '')
    return 1
  end
end
return 0
