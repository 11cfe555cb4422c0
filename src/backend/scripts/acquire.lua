-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
-- An acquire that is not fair: a fair waiter's acquire is fair_acquire.lua, and this script
-- carries nothing of the queue but the one look that keeps it from overtaking a fair waiter
-- (while the queue exists; a queue left by a dead gateway's waiters is cleared by
-- queue_clear.lua, which the gateway runs on the reply {5}, and the acquire run again).
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the lock's fair queue (see fair_head.lua): while it exists, this acquire does not
--          take the lock
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
--         {0, pttl_ms, 1}      held by the set of grants kept beside the lock (a read/write
--                              lock's readers): the value is its marker, which begins with
--                              '~' (byte 126; no token does)
--         {5}                  free, but fair waiters are queued for it (or were: see above)
--         {6}                  (idempotent acquires) held by a grant of the same idempotency
--                              key for another kind of grant (key_reused of grant.lua)
--
-- Written for the fewest calls and the least work on the common path (a free lock, no queue):
-- GET, TIME, EXISTS over the queue, one SET ... GET on the counter, the SET and the PUBLISH.
-- Every call, argument and closure here is paid by every plain acquire of the fleet
-- (bench/redis-ceiling.sh), so this script writes out the rules of grant.lua instead of
-- taking its prelude: `next_fence` (the fence), `fence_text_of` (a token of this stem),
-- `key_reused` and `holder_record`, whose closures a run would otherwise make (about 1.8k of
-- Redis's instructions an acquire for three of them, bench/README.md). They must stay the
-- same as grant.lua's: tests/it/grant_rules.rs runs this script against the same cases as
-- the prelude.
local holder = redis.call('GET', KEYS[1])
if holder then
  -- fence_text_of(holder, ARGV[1]), written out.
  local stem = ARGV[1]
  if string.sub(holder, 1, #stem + 1) == stem .. '.' then
    local ours = string.match(string.sub(holder, #stem + 2), '^%d+$')
    if ours and #ours <= 19 then
      if KEYS[4] and ARGV[3] ~= '' then
        redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
      end
      return {2, tonumber(ours), redis.call('PTTL', KEYS[1])}
    end
  end
  -- key_reused(holder, stem), written out; asked only by idempotent attempts, which pay for
  -- it (a claim id is theirs alone).
  if KEYS[4] and ARGV[3] ~= '' and #stem >= 22
      and string.sub(holder, 1, 22) == string.sub(stem, 1, 22) then
    return {6}
  end
  if string.byte(holder, 1) == 126 then
    return {0, redis.call('PTTL', KEYS[1]), 1}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local time = redis.call('TIME')
if redis.call('EXISTS', KEYS[3]) == 1 then
  -- Rare: the moment between a release and its head's grant, or waiters of a dead gateway.
  return {5}
end
-- next_fence(KEYS[2], time), written out: max(previous + 1, now in microseconds).
local text = time[1] .. string.sub('00000' .. time[2], -6)
local fence = tonumber(text)
local previous = tonumber(redis.call('SET', KEYS[2], text, 'GET'))
if previous and previous >= fence then
  -- The counter is at or ahead of the clock (grants in the same microsecond, a clock that
  -- stepped back): the fence follows the counter.
  fence = previous + 1
  text = string.format('%.0f', fence)
  redis.call('SET', KEYS[2], text)
end
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[4] then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
  end
  if ARGV[4] ~= '' then
    -- holder_record(text, ARGV[4]), written out.
    redis.call('SET', KEYS[5], '{"fence":' .. text .. ',' .. ARGV[4], 'PX', ARGV[2])
  end
end
return fence
