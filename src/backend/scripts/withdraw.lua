-- Withdraw: undo a grant the gateway made but could not deliver, whose fence it may not know
-- (the reply was lost). Deletes the lock if a token of the given stem holds it, and, for an
-- idempotent grant (whose stem several attempts share), only while the given attempt is still
-- the last to have claimed it: a later attempt that found the grant again owns it now.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the claim key
-- KEYS[3]  (stems marked as having one) the holder key
-- ARGV[1]  the token stem
-- ARGV[2]  the name's release channel, or '' to withdraw without a word (a Redlock partial
--          grant: see `RedlockBackend::acquire_lock`)
-- ARGV[3]  claim id, or '' when the stem is this attempt's alone
--
-- Returns 1 withdrawn, 0 nothing of this attempt's was held.
local holder = redis.call('GET', KEYS[1])
if not holder or not fence_text_of(holder, ARGV[1]) then
  return 0
end
if ARGV[3] ~= '' then
  if redis.call('GET', KEYS[2]) ~= ARGV[3] then
    return 0
  end
  redis.call('DEL', KEYS[2])
end
if KEYS[3] then
  redis.call('DEL', KEYS[1], KEYS[3])
else
  redis.call('DEL', KEYS[1])
end
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
