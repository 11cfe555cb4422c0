-- Semaphore release: remove the permit a token holds, then announce it to waiting gateways.
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
-- ARGV[1]  token
-- ARGV[2]  the semaphore's release channel
--
-- Returns 1 released, 0 not held (an expired permit not yet reclaimed is removed, but was
-- not held any more).
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], 'holder:' .. ARGV[1], 'claim:' .. string.match(ARGV[1], '^(.*)%.'))
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
redis.call('PUBLISH', ARGV[2], '')
if score <= now_ms then
  return 0
end
return 1
