-- Semaphore renew: a new expiry for the permit a token holds, if it is still live.
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 renewed, 0 not held (expired, released, never granted).
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score or score <= now_ms then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now_ms + tonumber(ARGV[2]), ARGV[1])
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIREAT', KEYS[1], last)
redis.call('PEXPIREAT', KEYS[2], last)
return 1
