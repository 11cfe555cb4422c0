-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
-- An acquire that is not fair: a fair waiter's acquire is fair_acquire.lua, and this script
-- carries nothing of the queue but the one look that keeps it from overtaking a fair waiter
-- (while the queue exists; a queue left by a dead gateway's waiters is cleared by
-- queue_clear.lua, which the gateway runs on the reply {5}, and the acquire run again).
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the name's fence counter as lockgate kept it before the fence-in-token format:
--          read once, superseded by KEYS[2], then deleted
-- KEYS[4]  the lock's fair queue (see fair_head.lua): while it exists, this acquire does not
--          take the lock
-- KEYS[5]  (idempotent acquires, or grants naming a holder) the claim key: which attempt last
--          claimed the grant
-- KEYS[6]  (with KEYS[5]) the holder key: who holds the grant (see src/backend/holder.rs)
-- ARGV[1]  the token stem (the gateway's part of the token)
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  (with KEYS[5]) the claim id, or '' for none
-- ARGV[4]  (with KEYS[5]) the holder record after its fence field (`"owner":"pod-a"}`), or ''
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
--
-- Written for the fewest calls on the common path (a free lock, no queue, no old counter):
-- GET, TIME, one EXISTS over the queue and the old counter together, next_fence() of grant.lua
-- (one SET ... GET), the SET and the PUBLISH. Every call and argument here is paid
-- by every plain acquire of the fleet (bench/redis-ceiling.sh measures it).
local holder = redis.call('GET', KEYS[1])
if holder then
  local ours = fence_text_of(holder, ARGV[1])
  if ours then
    if KEYS[5] and ARGV[3] ~= '' then
      redis.call('SET', KEYS[5], ARGV[3], 'PX', ARGV[2])
    end
    return {2, tonumber(ours), redis.call('PTTL', KEYS[1])}
  end
  if string.byte(holder, 1) == 126 then
    return {0, redis.call('PTTL', KEYS[1]), 1}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local time = redis.call('TIME')
local legacy
if redis.call('EXISTS', KEYS[4], KEYS[3]) > 0 then
  -- Rare: a queue (the moment between a release and its head's grant, or waiters of a dead
  -- gateway) or an old counter.
  if redis.call('EXISTS', KEYS[4]) == 1 then
    return {5}
  end
  if redis.call('EXISTS', KEYS[3]) == 1 then
    legacy = KEYS[3]
  end
end
local fence, text = next_fence(KEYS[2], time, legacy)
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[5] then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[5], ARGV[3], 'PX', ARGV[2])
  end
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[6], holder_record(text, ARGV[4]), 'PX', ARGV[2])
  end
end
return fence
