-- Release of a reentrant grant: gives back one hold (see reenter.lua); the last one releases
-- the lock as release.lua does, and announces it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the holds hash
-- KEYS[3]  (grants marked as having one) the holder key, deleted with the lock
-- ARGV[1]  token
-- ARGV[2]  the name's release channel
--
-- Returns 1 released, 0 not held, -1 held by another token (or ARGV[1] is a marker),
--         {holds} still held, `holds` times.
local held = held_by(KEYS[1], ARGV[1])
if held ~= 1 then
  return held
end
local holds = tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 1
if holds > 2 then
  redis.call('HSET', KEYS[2], ARGV[1], holds - 1)
  return {holds - 1}
elseif holds == 2 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return {1}
end
redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[2], '')
return 1
