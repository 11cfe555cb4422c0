-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the name's fence counter as lockgate kept it before the fence-in-token format:
--          read once, superseded by KEYS[2], then deleted
-- KEYS[4]  (idempotent acquires, or grants naming a holder) the claim key: which attempt last
--          claimed the grant
-- KEYS[5]  (with KEYS[4]) the holder key: who holds the grant (see src/backend/holder.rs)
-- ARGV[1]  the token stem (the gateway's part of the token)
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  (with KEYS[4]) the claim id, or '' for none
-- ARGV[4]  (with KEYS[4]) the holder record after its fence field (`"owner":"pod-a"}`), or ''
--          for none: stored as `{"fence":<fence>,` .. ARGV[4]
--
-- A grant is announced on the channel `<KEYS[1]>:acquired`.
--
-- Returns fence                granted now: the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  already held by a token of this stem (an idempotent retry)
--         {0, pttl_ms}         held by another token (pttl -1: the key has no expiry)
--         {0, pttl_ms, 1}      held by readers (the value is the marker '~shared', see
--                              shared_acquire.lua)
--
-- The fence is max(previous + 1, Redis TIME in microseconds) over the slot counter (and the
-- old per-name counter while one exists): the twin of next_fence() in src/backend/fence.rs.
-- Lua numbers are doubles, exact up to 2^53: microsecond timestamps until the year 2255.
-- Written for the fewest calls on the common path (a free lock, the clock ahead of the
-- counter): the clock's text is the fence's, and one SET ... GET both reads and advances the
-- counter.
local holder = redis.call('GET', KEYS[1])
if holder then
  local prefix = ARGV[1] .. '.'
  if string.sub(holder, 1, #prefix) == prefix then
    if KEYS[4] and ARGV[3] ~= '' then
      redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
    end
    return {2, tonumber(string.sub(holder, #prefix + 1)) or -1, redis.call('PTTL', KEYS[1])}
  end
  if holder == '~shared' then
    return {0, redis.call('PTTL', KEYS[1]), 1}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local text = now[1] .. string.sub('00000' .. now[2], -6)
local fence = tonumber(text)
local previous = tonumber(redis.call('SET', KEYS[2], text, 'GET'))
local legacy = tonumber(redis.call('GET', KEYS[3]))
if (previous and previous >= fence) or (legacy and legacy >= fence) then
  -- The counter is at or ahead of the clock (grants in the same microsecond, a clock that
  -- stepped back, an old counter): the fence follows the counter.
  fence = math.max(previous or 0, legacy or 0) + 1
  text = string.format('%.0f', fence)
  redis.call('SET', KEYS[2], text)
end
if legacy then
  redis.call('DEL', KEYS[3])
end
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[4] then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
  end
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[5], '{"fence":' .. text .. ',' .. ARGV[4], 'PX', ARGV[2])
  end
end
return fence
