-- Raise fence (Redlock): lift a name's fence counter to at least a given fence.
--
-- After a Redlock grant the gateway returns the largest fence any granting node issued, and
-- raises every granting node's counter to it. Any later majority shares at least one node with
-- this one, so its fence is larger than this one: fences stay monotonic across the nodes.
--
-- KEYS[1]  the name's fence counter
-- ARGV[1]  the fence
-- ARGV[2]  fence counter retention in milliseconds
--
-- Returns the counter's value afterwards.
local current = tonumber(redis.call('GET', KEYS[1])) or 0
local fence = tonumber(ARGV[1])
if current < fence then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return fence
end
return current
