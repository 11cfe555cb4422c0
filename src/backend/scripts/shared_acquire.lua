-- Shared acquire (read/write locks): a reader's grant, unless a writer holds the name or waits
-- for it. See src/backend/shared.rs.
--
-- KEYS[1]  the lock key: a writer's token, or '~shared' while readers hold the name
-- KEYS[2]  the readers: a sorted set of tokens scored by expiry (ms, TIME)
-- KEYS[3]  the fence counter of the name's hash slot
-- KEYS[4]  the readers' hash: `claim:<stem>` (idempotent grants), `holder:<token>`
-- KEYS[5]  the hold-off key: present while a writer waits (no new reader meanwhile)
-- ARGV[1]  the token stem
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  the claim id, or '' for none
-- ARGV[4]  the holder record after its fence field, or '' for none
--
-- The marker and both reader keys live as long as the longest reader.
--
-- Returns fence                granted now: the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  a reader of this stem holds it (an idempotent retry)
--         {0, pttl_ms}         a writer holds it, or waits (pttl -1: no expiry)
local value = redis.call('GET', KEYS[1])
if value and value ~= '~shared' then
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms)
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
  for _, token in ipairs(expired) do
    redis.call('HDEL', KEYS[4], 'holder:' .. token, 'claim:' .. string.match(token, '^(.*)%.'))
  end
end
local prefix = ARGV[1] .. '.'
local held = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #held, 2 do
  if string.sub(held[i], 1, #prefix) == prefix then
    if ARGV[3] ~= '' then
      redis.call('HSET', KEYS[4], 'claim:' .. ARGV[1], ARGV[3])
    end
    return {2, tonumber(string.sub(held[i], #prefix + 1)) or -1, tonumber(held[i + 1]) - now_ms}
  end
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, redis.call('PTTL', KEYS[5])}
end
local text = now[1] .. string.sub('00000' .. now[2], -6)
local fence = tonumber(text)
local previous = tonumber(redis.call('SET', KEYS[3], text, 'GET'))
if previous and previous >= fence then
  fence = previous + 1
  text = string.format('%.0f', fence)
  redis.call('SET', KEYS[3], text)
end
local token = ARGV[1] .. '.' .. text
redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[2]), token)
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[4], 'claim:' .. ARGV[1], ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[4], 'holder:' .. token, '{"fence":' .. text .. ',' .. ARGV[4])
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
redis.call('SET', KEYS[1], '~shared', 'PXAT', last)
redis.call('PEXPIREAT', KEYS[2], last)
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('PEXPIREAT', KEYS[4], last)
end
return fence
