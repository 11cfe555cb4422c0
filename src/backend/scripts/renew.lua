-- Renew: compare-and-expire. Only the holder's token may set a new ttl. The fence travels in
-- the token, so nothing else is read; the keys that live as long as the grant (its holder
-- record, a reentrant grant's hold count), if the token is marked as having them, get the
-- same ttl. A renewal extends the lease, never a reentrant grant's hold count.
--
-- KEYS[1]  the lock key
-- KEYS[2…] (grants marked as having them) the holder key, the holds hash
-- ARGV[1]  token
-- ARGV[2]  new ttl in milliseconds
--
-- Returns 1 renewed, 0 not held, -1 held by another token (or ARGV[1] is a marker).
local held = held_by(KEYS[1], ARGV[1])
if held ~= 1 then
  return held
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
