-- Semaphore release: remove the permit a token holds (ARGV[1]), or withdraw the one of a stem
-- that was never delivered (ARGV[1] empty, ARGV[3] the stem, ARGV[4] the claim that must still
-- be its last, or ''), then announce it to waiting gateways. (After lease_set.lua.)
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
-- ARGV[1]  token, or '' to withdraw by stem
-- ARGV[2]  the semaphore's release channel
-- ARGV[3]  (withdraw) the token stem
-- ARGV[4]  (withdraw) the claim id, or ''
--
-- Returns 1 released (a live permit), 0 not held (an expired permit not yet reclaimed is
-- removed, but was not held any more).
local _, now_ms = clock()
local ended = take_out(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[4])
if not ended then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
redis.call('PUBLISH', ARGV[2], '')
if ended <= now_ms then
  return 0
end
return 1
