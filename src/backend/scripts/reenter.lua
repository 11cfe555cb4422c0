-- Reenter: the holder of a reentrant grant takes it once more. The hold count lives in a hash
-- beside the lock, its field the token, and only while the grant is held more than once (no
-- field: once). Keyed by the token, so that a count left by an earlier grant (a hash that
-- outlived its lock by a moment) never counts for the next one.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the holds hash
-- KEYS[3]  (grants marked as having one) the holder key
-- ARGV[1]  token (marked reentrant: the gateway checks the mark before sending it)
-- ARGV[2]  ttl in milliseconds: the lease is made to last at least this long, never shortened
--
-- Returns {1, holds, pttl_ms}  held once more, `holds` times now
--         {0}                  not held
--         {-1}                 held by another token (or ARGV[1] is a marker)
local held = held_by(KEYS[1], ARGV[1])
if held ~= 1 then
  return {held}
end
local holds = (tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 1) + 1
redis.call('HSET', KEYS[2], ARGV[1], holds)
local left = redis.call('PTTL', KEYS[1])
local ttl = tonumber(ARGV[2])
if left >= 0 and left < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if KEYS[3] then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
  left = ttl
end
-- The count lives exactly as long as the lease (a key without expiry: as long as the key).
if left >= 0 then
  redis.call('PEXPIRE', KEYS[2], left)
end
return {1, holds, left}
