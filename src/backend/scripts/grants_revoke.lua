-- Revoke every live grant of a set of grants (an operator's force release of a semaphore's
-- permits): the set and its record of claims and holders are deleted, and the live grants'
-- tokens are kept in the set's revocation key until the last of them would have ended, so that
-- each holder's next renewal or release is told "revoked" rather than "not held". The release
-- is announced to waiting gateways.
--
-- KEYS[1]  the tokens, scored by expiry in ms (see lease_set.lua)
-- KEYS[2]  the record of claims and holders (and a limited kind's limit)
-- KEYS[3]  the revoked tokens, scored as in KEYS[1]
-- ARGV[1]  the channel a release is announced on
--
-- Returns how many live grants were revoked.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
local live = redis.call('ZCARD', KEYS[1])
if live == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 0
end
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
redis.call('ZUNIONSTORE', KEYS[3], 2, KEYS[3], KEYS[1], 'AGGREGATE', 'MAX')
redis.call('DEL', KEYS[1], KEYS[2])
local keep = last - now_ms
if redis.call('PTTL', KEYS[3]) < keep then
  redis.call('PEXPIRE', KEYS[3], keep)
end
redis.call('PUBLISH', ARGV[1], '')
return live
