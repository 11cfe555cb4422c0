-- Prelude shared by acquire.lua and renew.lua (concatenated in front of them at compile time).
-- Twin of next_fence() in src/backend/fence.rs: the two must stay identical.
--
-- issue_fence(counter_key, retention_ms): the next fence for a name,
--   max(previous + 1, Redis TIME in microseconds), stored in counter_key for retention_ms.
--   Lua numbers are doubles: exact up to 2^53, i.e. microsecond timestamps until year 2255.
local function issue_fence(counter_key, retention_ms)
  local now = redis.call('TIME')
  local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local previous = tonumber(redis.call('GET', counter_key)) or 0
  local fence = math.max(previous + 1, now_us)
  redis.call('SET', counter_key, string.format('%.0f', fence), 'PX', retention_ms)
  return fence
end

-- current_fence(counter_key, retention_ms): the fence of the current grant, keeping the counter
--   for another retention period. If the counter is gone (evicted, deleted by hand) a new fence
--   is issued: handing the holder a larger fence than it had is always safe.
local function current_fence(counter_key, retention_ms)
  local fence = tonumber(redis.call('GET', counter_key))
  if not fence then
    return issue_fence(counter_key, retention_ms)
  end
  redis.call('PEXPIRE', counter_key, retention_ms)
  return fence
end
