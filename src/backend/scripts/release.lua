-- Release: compare-and-delete, then announce the release to waiting gateways. Deleting without
-- comparing would let a holder whose lease expired delete the lock of the next holder;
-- comparing outside a script would race the same way.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (grants whose token is marked as having one) the holder key, deleted with the lock
-- ARGV[1]  token
-- ARGV[2]  the name's release channel (gateways with waiters for the name subscribe to it)
-- ARGV[3]  (a grant with a minimum hold, `min_hold_ms`) until when it must stay held, in ms
--          since the epoch: its grant time (the fence) plus the minimum
-- ARGV[4]  (with ARGV[3]) the minimum itself, in ms: the most it can still have to stay
--
-- Returns 1 released, 0 not held, -1 held by another token (or ARGV[1] is a marker), or
-- {2, ms}: released before its minimum hold, so left to expire in ms instead (a PEXPIRE, not
-- a DEL: it stays held until then, and waiters are not told of a release).
--
-- The compare is presented_token.lua's `held_by`, written out: this is the release every plain
-- lock of the fleet pays for, and defining the prelude's functions on every run costs Redis
-- more than the compare itself (bench/README.md, "What a lock costs Redis"). A marker (a value
-- beginning with '~', byte 126) is refused as there; the common path (the holder's token, no
-- minimum hold, no holder key) calls Redis for GET, DEL and PUBLISH only.
local value = redis.call('GET', KEYS[1])
if value ~= ARGV[1] then
  if value then
    return -1
  end
  return 0
end
if string.byte(value, 1) == 126 then
  return -1
end
if ARGV[3] then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local left = math.min(tonumber(ARGV[3]) - now, tonumber(ARGV[4]))
  if left > 0 then
    for _, key in ipairs(KEYS) do
      redis.call('PEXPIRE', key, left)
    end
    return {2, left}
  end
end
if KEYS[2] then
  redis.call('DEL', unpack(KEYS))
else
  redis.call('DEL', KEYS[1])
end
redis.call('PUBLISH', ARGV[2], '')
return 1
