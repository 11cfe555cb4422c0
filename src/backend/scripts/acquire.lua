-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically;
-- for a fair waiter, only at the head of the name's queue (see fair.lua).
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the name's fence counter as lockgate kept it before the fence-in-token format:
--          read once, superseded by KEYS[2], then deleted
-- KEYS[4]  the lock's fair queue: an acquire that is not fair never overtakes it
-- KEYS[5]  the queue's liveness hash
-- KEYS[6]  (idempotent acquires, or grants naming a holder) the claim key: which attempt last
--          claimed the grant
-- KEYS[7]  (with KEYS[6]) the holder key: who holds the grant (see src/backend/holder.rs)
-- ARGV[1]  the token stem (the gateway's part of the token)
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  a fair waiter's member in the queue, `<gateway>:<waiter>`, or '' (not fair)
-- ARGV[4]  (fair) its priority, 0 to 9
-- ARGV[5]  (fair) the score of the place it had, or '' for a new place
-- ARGV[6]  (fair) how long its gateway counts as alive from now, in milliseconds
-- ARGV[7]  (with KEYS[6]) the claim id, or '' for none
-- ARGV[8]  (with KEYS[6]) the holder record after its fence field (`"owner":"pod-a"}`), or ''
--          for none: stored as `{"fence":<fence>,` .. ARGV[8]
--
-- A grant is announced on the channel `<KEYS[1]>:acquired`.
--
-- Returns fence                granted now: the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  already held by a token of this stem (an idempotent retry)
--         {0, pttl_ms}         held by another token (pttl -1: the key has no expiry)
--         {0, pttl_ms, 1}      held by readers (the value is the marker '~shared', see
--                              shared_acquire.lua)
--         {4, pttl_ms, position, score}  (fair) queued, `position` from the head (1: next);
--                              pttl -2 when the lock is free but another waiter is first
--         {5}                  (not fair) free, but fair waiters are queued for it
--
-- The fence is next_fence() of grant.lua over the slot counter and the old per-name counter.
local queue, live, member = KEYS[4], KEYS[5], ARGV[3]
-- Redis TIME, read once and only where needed: an acquire that is not fair and finds the
-- lock held reads no clock, as before fair queues.
local time
local function clock()
  time = time or redis.call('TIME')
  return time
end
local holder = redis.call('GET', KEYS[1])
if holder then
  local ours = fence_text_of(holder, ARGV[1])
  if ours then
    if KEYS[6] and ARGV[7] ~= '' then
      redis.call('SET', KEYS[6], ARGV[7], 'PX', ARGV[2])
    end
    if member ~= '' then
      leave_queue(KEYS[1], queue, live, member, time_ms(clock()))
    end
    return {2, tonumber(ours), redis.call('PTTL', KEYS[1])}
  end
end
local score
if member ~= '' then
  score = enqueue(queue, live, member, tonumber(ARGV[4]), tonumber(ARGV[5]),
    time_ms(clock()), tonumber(ARGV[6]))
end
if holder then
  local left = redis.call('PTTL', KEYS[1])
  if member ~= '' then
    return {4, left, redis.call('ZRANK', queue, member) + 1, score}
  end
  if holder == '~shared' then
    return {0, left, 1}
  end
  return {0, left}
end
if member ~= '' or redis.call('EXISTS', queue) == 1 then
  local now = time_ms(clock())
  local head = queue_head(queue, live, now)
  if head and head ~= member then
    -- Free, and another waiter is first. Its gateway was told when it came first, and looks
    -- again within its re-check if that word was lost: telling it again here would cost a
    -- look for every newcomer arriving in the moment between a release and the next grant.
    if member == '' then
      return {5}
    end
    return {4, -2, redis.call('ZRANK', queue, member) + 1, score}
  end
  if head then
    leave_queue(KEYS[1], queue, live, member, now)
  end
end
local fence, text = next_fence(KEYS[2], clock(), KEYS[3])
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[6] then
  if ARGV[7] ~= '' then
    redis.call('SET', KEYS[6], ARGV[7], 'PX', ARGV[2])
  end
  if ARGV[8] ~= '' then
    redis.call('SET', KEYS[7], holder_record(text, ARGV[8]), 'PX', ARGV[2])
  end
end
return fence
