-- Release: compare-and-delete. Deleting without comparing would let a holder whose lease
-- expired delete the lock of the next holder; comparing outside a script would race the same way.
--
-- KEYS[1]  the lock key
-- ARGV[1]  token
--
-- Returns 1 released, 0 not held, -1 held by another token.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 0
end
if holder ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
