-- The node's marker: how every gateway learns that a Redis node forgot its data (a restart
-- without persistence, FLUSHALL/FLUSHDB, an empty replica promoted). A hash without a ttl:
-- `id`, random, made by the first gateway that finds the marker missing; `lease_ms`, the
-- longest lease any gateway on the node has granted or renewed. A gateway that saw one `id`
-- and now finds another, or none, knows the node lost everything written before, and holds
-- grants on it back for the last `lease_ms` it read (see `backend::guards`).
-- Run every CLOCK_CHECK_EVERY by each gateway, off the request path.
-- KEYS[1]: the marker.
-- ARGV[1]: an id to set if the marker is missing; ARGV[2]: this gateway's longest lease (ms).
-- Returns {id, lease_ms, 1 if this call made the marker else 0}.
local id = redis.call('HGET', KEYS[1], 'id')
if not id then
    redis.call('HSET', KEYS[1], 'id', ARGV[1], 'lease_ms', ARGV[2])
    return {ARGV[1], ARGV[2], 1}
end
local longest = redis.call('HGET', KEYS[1], 'lease_ms')
if not longest or tonumber(ARGV[2]) > tonumber(longest) then
    -- Written only when a longer lease appears: on a full server (noeviction) this is the one
    -- write that can be refused, and it is retried at the next check.
    redis.call('HSET', KEYS[1], 'lease_ms', ARGV[2])
    longest = ARGV[2]
end
return {id, longest, 0}
