-- Revoke: delete the lock whoever holds it (an operator's force release), and remember the
-- revoked token for as long as its lease had left, so that its holder's next renewal or
-- release is told "revoked" rather than "not held".
--
-- KEYS[1]  the lock key
-- KEYS[2]  the holder key
-- KEYS[3]  the revocation key: the revoked token, until the revoked lease would have ended
-- KEYS[4]  a reentrant grant's hold count (see reenter.lua)
-- KEYS[5]  (when a set of grants is kept beside the lock, a read/write lock's readers) the
--          set's tokens, KEYS[6] its hash of claims and holders: deleted with its marker (a
--          value beginning with '~', byte 126; no token has one); KEYS[7] the set's revoked
--          tokens, which keeps the live ones until the last would have ended (as
--          grants_revoke.lua does), so that each reader is told "revoked" too
-- ARGV[1]  the name's release channel
--
-- Returns 1 revoked, 0 not held.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 0
end
local left = redis.call('PTTL', KEYS[1])
-- A key without expiry (written by another client) is remembered for a minute.
if left <= 0 then
  left = 60000
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
if KEYS[5] and string.byte(holder, 1) == 126 then
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now_ms)
  if redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('ZUNIONSTORE', KEYS[7], 2, KEYS[7], KEYS[5], 'AGGREGATE', 'MAX')
    if redis.call('PTTL', KEYS[7]) < left then
      redis.call('PEXPIRE', KEYS[7], left)
    end
  end
  redis.call('DEL', KEYS[5], KEYS[6])
end
redis.call('SET', KEYS[3], holder, 'PX', left)
redis.call('PUBLISH', ARGV[1], '')
return 1
