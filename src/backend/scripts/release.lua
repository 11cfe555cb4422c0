-- Release: compare-and-delete, then announce the release to waiting gateways. Deleting without
-- comparing would let a holder whose lease expired delete the lock of the next holder;
-- comparing outside a script would race the same way.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (grants whose token is marked as having one) the holder key, deleted with the lock
-- ARGV[1]  token
-- ARGV[2]  the name's release channel (gateways with waiters for the name subscribe to it)
--
-- Returns 1 released, 0 not held, -1 held by another token (or ARGV[1] is a marker).
local held = held_by(KEYS[1], ARGV[1])
if held ~= 1 then
  return held
end
-- The lock and the keys that live with its grant.
redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[2], '')
return 1
