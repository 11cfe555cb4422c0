-- Renew: compare-and-expire. Only the holder's token may set a new ttl.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the name's fence counter
-- ARGV[1]  token
-- ARGV[2]  new ttl in milliseconds
-- ARGV[3]  fence counter retention in milliseconds
--
-- Returns {1, fence, ttl_ms}  renewed
--         {0}                 not held
--         {-1}                held by another token
local holder = redis.call('GET', KEYS[1])
if not holder then
  return {0}
end
if holder ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, current_fence(KEYS[2], ARGV[3]), tonumber(ARGV[2])}
