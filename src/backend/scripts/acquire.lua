-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
--
-- KEYS[1]  the lock key; its value is exactly the holder's token
-- KEYS[2]  the name's fence counter (same hash slot as KEYS[1])
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  fence counter retention in milliseconds
--
-- Returns {1, fence, ttl_ms}   granted now
--         {2, fence, pttl_ms}  already held by this very token (a retried idempotent acquire)
--         {0, pttl_ms}         held by another token (pttl -1: the key has no expiry)
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return {2, current_fence(KEYS[2], ARGV[3]), redis.call('PTTL', KEYS[1])}
end
if holder then
  return {0, redis.call('PTTL', KEYS[1])}
end
local fence = issue_fence(KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, fence, tonumber(ARGV[2])}
