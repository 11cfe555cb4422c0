-- Semaphore acquire: reclaim expired permits, then take a permit if fewer than the limit are
-- held, issuing a fence, atomically. (After lease_set.lua, whose functions it uses.)
--
-- KEYS[1]  the permits: a sorted set of tokens (`<stem>.<fence>`) scored by expiry (ms, TIME)
-- KEYS[2]  the fence counter of the name's hash slot (the lock's; same slot as KEYS[1])
-- KEYS[3]  the semaphore's hash: `limit`, and the claims and holders of lease_set.lua
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
--         {6}                  (idempotent acquires) a permit is held by a grant of the same
--                              idempotency key for another kind of grant
local now, now_ms = clock()
reclaim(KEYS[1], KEYS[3], now_ms)
local held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
if #held > 0 then
  local again = found_again(held, KEYS[3], ARGV[1], ARGV[4], now_ms)
  if again then
    return again
  end
  local limit = tonumber(redis.call('HGET', KEYS[3], 'limit'))
  if limit and limit ~= tonumber(ARGV[3]) then
    return {3, limit}
  end
  if #held / 2 >= tonumber(ARGV[3]) then
    return {0, tonumber(held[2]) - now_ms}
  end
end
local fence, text = next_fence(KEYS[2], now)
add(KEYS[1], KEYS[3], ARGV[1], text, now_ms + tonumber(ARGV[2]), ARGV[4], ARGV[5])
redis.call('HSET', KEYS[3], 'limit', ARGV[3])
expire_with(KEYS[1], KEYS[3], last_end(KEYS[1]))
return fence
