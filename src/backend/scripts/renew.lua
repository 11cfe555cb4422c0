-- Renew: compare-and-expire. Only the holder's token may set a new ttl. The fence travels in
-- the token, so nothing else is read; the holder record, if the token is marked as having
-- one, gets the same ttl.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (grants marked as having one) the holder key
-- ARGV[1]  token
-- ARGV[2]  new ttl in milliseconds
--
-- Returns 1 renewed, 0 not held, -1 held by another token (or ARGV[1] is a marker).
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 0
end
if holder ~= ARGV[1] or is_marker(ARGV[1]) then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
