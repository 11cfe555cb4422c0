-- Semaphore renew: a new expiry for the permit a token holds, if it is still live. (After
-- lease_set.lua.)
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 renewed, 0 not held (expired, released, never granted).
local _, now_ms = clock()
if not extend(KEYS[1], ARGV[1], now_ms + tonumber(ARGV[2]), now_ms) then
  return 0
end
expire_with(KEYS[1], KEYS[2], last_end(KEYS[1]))
return 1
