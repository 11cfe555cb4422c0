-- Shared acquire (read/write locks): a reader's grant, unless a writer holds the name or waits
-- for it. See store.rs in this folder. (After lease_set.lua, whose functions it uses.)
--
-- KEYS[1]  the lock key: a writer's token, or '~shared' while readers hold the name
-- KEYS[2]  the readers: a sorted set of tokens scored by expiry (ms, TIME)
-- KEYS[3]  the fence counter of the name's hash slot
-- KEYS[4]  the readers' hash: the claims and holders of lease_set.lua
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
--         {6}                  (idempotent acquires) a writer or a reader holds it by a grant
--                              of the same idempotency key for another kind of grant
local value = redis.call('GET', KEYS[1])
if value and value ~= '~shared' then
  if ARGV[3] ~= '' and key_reused(value, ARGV[1]) then
    return {6}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local now, now_ms = clock()
reclaim(KEYS[2], KEYS[4], now_ms)
local held = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local again = found_again(held, KEYS[4], ARGV[1], ARGV[3], now_ms)
if again then
  return again
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, redis.call('PTTL', KEYS[5])}
end
local fence, text = next_fence(KEYS[3], now)
add(KEYS[2], KEYS[4], ARGV[1], text, now_ms + tonumber(ARGV[2]), ARGV[3], ARGV[4])
local last = last_end(KEYS[2])
redis.call('SET', KEYS[1], '~shared', 'PXAT', last)
expire_with(KEYS[2], KEYS[4], last)
return fence
