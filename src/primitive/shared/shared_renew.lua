-- Shared renew: a new expiry for the reader a token holds, while it is live and the name is
-- still held by readers (a revoke deletes them all). (After lease_set.lua.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the readers (see shared_acquire.lua)
-- KEYS[3]  the readers' hash
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 renewed, 0 not held.
local _, now_ms = clock()
if redis.call('GET', KEYS[1]) ~= '~shared'
  or not extend(KEYS[2], ARGV[1], now_ms + tonumber(ARGV[2]), now_ms) then
  return 0
end
local last = last_end(KEYS[2])
redis.call('PEXPIREAT', KEYS[1], last)
expire_with(KEYS[2], KEYS[3], last)
return 1
