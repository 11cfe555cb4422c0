-- Inspect: remaining ttl and current fence, read in one atomic step. Never the token.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the name's fence counter
--
-- Returns {pttl_ms, fence}: pttl -2 when not held, -1 when the key has no expiry;
--         fence -1 when the counter is gone.
return {redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2])) or -1}
