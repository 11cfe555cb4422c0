-- Finalize (Redlock): after a majority granted, give every granting node the fence the gateway
-- chose (the largest any of them issued, or the one an idempotent retry found), so that all
-- nodes hold the same token, and lift the node's fence counter to it. Any later majority
-- shares at least one node with this one, so the fence it issues is larger: fences stay
-- monotonic across the nodes.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence counter of the name's hash slot
-- KEYS[3]  the holder key: its record carries the node's fence, replaced by the chosen one
-- ARGV[1]  the token stem
-- ARGV[2]  the chosen fence (decimal)
--
-- Returns 1 when the node holds `<stem>.<fence>` afterwards, 0 when it no longer holds a token
-- of this stem.
local holder = redis.call('GET', KEYS[1])
local issued = holder and fence_text_of(holder, ARGV[1])
if not issued then
  return 0
end
if issued ~= ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1] .. '.' .. ARGV[2], 'KEEPTTL')
  local record = redis.call('GET', KEYS[3])
  local field = holder_record(issued, '')
  if record and string.sub(record, 1, #field) == field then
    redis.call('SET', KEYS[3], holder_record(ARGV[2], string.sub(record, #field + 1)), 'KEEPTTL')
  end
end
raise_fence(KEYS[2], ARGV[2])
return 1
