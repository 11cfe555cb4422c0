-- Semaphore inspect: the limit and the live permits, without changing anything.
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
--
-- Returns {limit or '', then per live permit in order of expiry: token, ms left, holder
-- record or ''}. The tokens stay in the gateway, which shows their fences only.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local held = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf', 'WITHSCORES')
local out = {redis.call('HGET', KEYS[2], 'limit') or ''}
if #held == 0 then
  return {''}
end
for i = 1, #held, 2 do
  out[#out + 1] = held[i]
  out[#out + 1] = string.format('%.0f', tonumber(held[i + 1]) - now_ms)
  out[#out + 1] = redis.call('HGET', KEYS[2], 'holder:' .. held[i]) or ''
end
return out
