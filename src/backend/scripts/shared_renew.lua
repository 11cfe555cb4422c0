-- Shared renew: a new expiry for the reader a token holds, while it is live and the name is
-- still held by readers (a revoke deletes them all).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the readers (see shared_acquire.lua)
-- KEYS[3]  the readers' hash
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 renewed, 0 not held.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local score = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if not score or score <= now_ms or redis.call('GET', KEYS[1]) ~= '~shared' then
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', now_ms + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIREAT', KEYS[1], last)
redis.call('PEXPIREAT', KEYS[2], last)
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PEXPIREAT', KEYS[3], last)
end
return 1
