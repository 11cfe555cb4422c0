-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the name's fence counter as lockgate kept it before the fence-in-token format:
--          read once, superseded by KEYS[2], then deleted
-- KEYS[4]  the claim key: which attempt last claimed an idempotent grant
-- ARGV[1]  the token stem (the gateway's part of the token)
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  claim id, or '' when the stem is this attempt's alone
-- ARGV[4]  claim ttl in milliseconds
--
-- Returns {1, fence}           granted now; the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  already held by a token of this stem (an idempotent retry)
--         {0, pttl_ms}         held by another token (pttl -1: the key has no expiry)
--
-- The fence is max(previous + 1, Redis TIME in microseconds) over the slot counter (and the
-- old per-name counter while one exists): the twin of next_fence() in src/backend/fence.rs.
-- Lua numbers are doubles, exact up to 2^53: microsecond timestamps until the year 2255.
local holder = redis.call('GET', KEYS[1])
if holder then
  local prefix = ARGV[1] .. '.'
  if string.sub(holder, 1, #prefix) == prefix then
    if ARGV[3] ~= '' then
      redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
    end
    return {2, tonumber(string.sub(holder, #prefix + 1)) or -1, redis.call('PTTL', KEYS[1])}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local fence = now[1] * 1000000 + now[2]
local previous = tonumber(redis.call('GET', KEYS[2]))
if previous and previous >= fence then
  fence = previous + 1
end
local legacy = tonumber(redis.call('GET', KEYS[3]))
if legacy then
  if legacy >= fence then
    fence = legacy + 1
  end
  redis.call('DEL', KEYS[3])
end
local text = string.format('%.0f', fence)
redis.call('SET', KEYS[2], text)
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
end
return {1, fence}
