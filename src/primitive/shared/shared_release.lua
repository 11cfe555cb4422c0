-- Shared release: remove the reader a token holds (ARGV[1]), or the one of a stem that was
-- never delivered (withdraw: ARGV[1] empty, ARGV[3] the stem, ARGV[4] the claim that must
-- still be its last, or ''). When no reader is left, the marker goes and the release is
-- announced as a writer's is, waking waiting writers. (After lease_set.lua.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the readers (see shared_acquire.lua)
-- KEYS[3]  the readers' hash
-- ARGV[1]  token, or '' to withdraw by stem
-- ARGV[2]  the name's release channel
-- ARGV[3]  (withdraw) the token stem
-- ARGV[4]  (withdraw) the claim id, or ''
--
-- Returns 1 released (a live reader), 0 not held.
--
-- Readers hold the name only under their marker. Without it (a writer holds the name, or
-- nobody), the readers' set is stale, whatever its scores say: a Redis clock that stepped
-- back revives keys that had expired but were not yet collected, the marker among them or not
-- (the deterministic simulation found a stale reader's release that then moved the expiry of
-- the writer holding the name, ending the writer's lock early). No reader is released then,
-- the stale set goes, and the lock key is left alone.
local _, now_ms = clock()
if redis.call('GET', KEYS[1]) ~= '~shared' then
  redis.call('DEL', KEYS[2], KEYS[3])
  return 0
end
local ended = take_out(KEYS[2], KEYS[3], ARGV[1], ARGV[3], ARGV[4])
if not ended then
  return 0
end
if redis.call('ZCOUNT', KEYS[2], '(' .. now_ms, '+inf') == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  redis.call('PUBLISH', ARGV[2], '')
else
  local last = last_end(KEYS[2])
  redis.call('PEXPIREAT', KEYS[1], last)
  expire_with(KEYS[2], KEYS[3], last)
end
if ended <= now_ms then
  return 0
end
return 1
