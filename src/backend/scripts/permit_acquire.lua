-- Semaphore acquire: reclaim expired permits, then take a permit if fewer than the limit are
-- held, issuing a fence, atomically.
--
-- KEYS[1]  the permits: a sorted set of tokens (`<stem>.<fence>`) scored by expiry (ms, TIME)
-- KEYS[2]  the fence counter of the name's hash slot (the lock's; same slot as KEYS[1])
-- KEYS[3]  the semaphore's hash: `limit`, `claim:<stem>` (idempotent grants: the attempt that
--          last claimed it), `holder:<token>` (who holds a permit, see src/backend/holder.rs)
-- ARGV[1]  the token stem
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  the limit asked for
-- ARGV[4]  the claim id, or '' for none
-- ARGV[5]  the holder record after its fence field, or '' for none
--
-- Both keys expire with the permit that runs longest, so a semaphore nobody uses leaves
-- nothing behind.
--
-- Returns fence                granted now: the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  a permit of this stem is held (an idempotent retry)
--         {0, pttl_ms}         all permits are held; the first of them ends in pttl_ms
--         {3, limit}           the permits held were granted under another limit
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  for _, token in ipairs(expired) do
    redis.call('HDEL', KEYS[3], 'holder:' .. token, 'claim:' .. string.match(token, '^(.*)%.'))
  end
end
local held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
if #held > 0 then
  local prefix = ARGV[1] .. '.'
  for i = 1, #held, 2 do
    if string.sub(held[i], 1, #prefix) == prefix then
      if ARGV[4] ~= '' then
        redis.call('HSET', KEYS[3], 'claim:' .. ARGV[1], ARGV[4])
      end
      return {2, tonumber(string.sub(held[i], #prefix + 1)) or -1, tonumber(held[i + 1]) - now_ms}
    end
  end
  local limit = tonumber(redis.call('HGET', KEYS[3], 'limit'))
  if limit and limit ~= tonumber(ARGV[3]) then
    return {3, limit}
  end
  if #held / 2 >= tonumber(ARGV[3]) then
    return {0, tonumber(held[2]) - now_ms}
  end
end
-- The fence, as the lock's acquire issues it: max(previous + 1, TIME in µs).
local text = now[1] .. string.sub('00000' .. now[2], -6)
local fence = tonumber(text)
local previous = tonumber(redis.call('SET', KEYS[2], text, 'GET'))
if previous and previous >= fence then
  fence = previous + 1
  text = string.format('%.0f', fence)
  redis.call('SET', KEYS[2], text)
end
local token = ARGV[1] .. '.' .. text
local expires = now_ms + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], expires, token)
redis.call('HSET', KEYS[3], 'limit', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], 'claim:' .. ARGV[1], ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[3], 'holder:' .. token, '{"fence":' .. text .. ',' .. ARGV[5])
end
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIREAT', KEYS[1], last)
redis.call('PEXPIREAT', KEYS[3], last)
return fence
