-- Shared release: remove the reader a token holds (ARGV[1]), or the one of a stem that was
-- never delivered (withdraw: ARGV[1] empty, ARGV[3] the stem, ARGV[4] the claim that must
-- still be its last, or ''). When no reader is left, the marker goes and the release is
-- announced as a writer's is, waking waiting writers.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the readers (see shared_acquire.lua)
-- KEYS[3]  the readers' hash
-- ARGV[1]  token, or '' to withdraw by stem
-- ARGV[2]  the name's release channel
-- ARGV[3]  (withdraw) the token stem
-- ARGV[4]  (withdraw) the claim id, or ''
--
-- Returns 1 released (a live reader), 0 not held.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local token = ARGV[1]
if token == '' then
  if ARGV[4] ~= '' and redis.call('HGET', KEYS[3], 'claim:' .. ARGV[3]) ~= ARGV[4] then
    return 0
  end
  local prefix = ARGV[3] .. '.'
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if string.sub(member, 1, #prefix) == prefix then
      token = member
    end
  end
  if token == '' then
    return 0
  end
end
local score = tonumber(redis.call('ZSCORE', KEYS[2], token))
if not score then
  return 0
end
redis.call('ZREM', KEYS[2], token)
redis.call('HDEL', KEYS[3], 'holder:' .. token, 'claim:' .. string.match(token, '^(.*)%.'))
if redis.call('ZCOUNT', KEYS[2], '(' .. now_ms, '+inf') == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
  if redis.call('GET', KEYS[1]) == '~shared' then
    redis.call('DEL', KEYS[1])
  end
  redis.call('PUBLISH', ARGV[2], '')
else
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
  redis.call('PEXPIREAT', KEYS[1], last)
  redis.call('PEXPIREAT', KEYS[2], last)
end
if score <= now_ms then
  return 0
end
return 1
