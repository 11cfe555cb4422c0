-- Shared inspect: the live readers, without changing anything.
--
-- KEYS[1]  the readers (see shared_acquire.lua)
-- KEYS[2]  the readers' hash
--
-- Returns per live reader in order of expiry: token, ms left, holder record or ''. The tokens
-- stay in the gateway, which shows their fences only.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local held = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #held, 2 do
  out[#out + 1] = held[i]
  out[#out + 1] = string.format('%.0f', tonumber(held[i + 1]) - now_ms)
  out[#out + 1] = redis.call('HGET', KEYS[2], 'holder:' .. held[i]) or ''
end
return out
