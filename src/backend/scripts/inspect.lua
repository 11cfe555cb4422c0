-- Inspect: remaining ttl and the current grant's fence, read in one atomic step. The token
-- never leaves the script.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the name's old per-name fence counter, for a grant of an older lockgate
--
-- Returns {pttl_ms, fence}: pttl -2 when not held, -1 when the key has no expiry;
--         fence -1 when the holder's token carries none and no old counter exists.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return {-2, -1}
end
local fence = tonumber(string.match(holder, '^[%w_-]+%.(%d+)$'))
  or tonumber(redis.call('GET', KEYS[2]))
  or -1
return {redis.call('PTTL', KEYS[1]), fence}
