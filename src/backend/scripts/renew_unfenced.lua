-- Renew a lock whose token carries no fence (taken by another Redis client, or by a lockgate
-- older than the fence-in-token format): compare-and-expire, and tell the fence the grant has.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence counter of the name's hash slot
-- KEYS[3]  the name's old per-name fence counter, if an older lockgate left one
-- ARGV[1]  token
-- ARGV[2]  new ttl in milliseconds
--
-- Returns {1, fence} renewed: the old per-name counter's fence if there is one, else a fence
--                    issued now from the slot counter (a larger fence than the holder had is
--                    always safe to hand it);
--         {0}        not held;
--         {-1}       held by another token.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return {0}
end
if holder ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local legacy = tonumber(redis.call('GET', KEYS[3]))
if legacy then
  return {1, legacy}
end
local now = redis.call('TIME')
local fence = now[1] * 1000000 + now[2]
local previous = tonumber(redis.call('GET', KEYS[2]))
if previous and previous >= fence then
  fence = previous + 1
end
redis.call('SET', KEYS[2], string.format('%.0f', fence))
return {1, fence}
