-- Fair acquire: a fair waiter takes the lock if it is free and its place heads the name's queue
-- (see fair_head.lua, fair.lua), and a fence is issued, atomically; else it keeps (or takes) its
-- place. A plain acquire is acquire.lua, which carries none of this.
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the lock's fair queue
-- KEYS[4]  the queue's liveness hash
-- KEYS[5]  (idempotent acquires, or grants naming a holder) the claim key: which attempt last
--          claimed the grant
-- KEYS[6]  (with KEYS[5]) the holder key: who holds the grant (see src/backend/holder.rs)
-- ARGV[1]  the token stem (the gateway's part of the token)
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  the waiter's member in the queue, `<gateway>:<waiter>`
-- ARGV[4]  its priority, 0 to 9
-- ARGV[5]  the score of the place it had, or '' for a new place
-- ARGV[6]  how long its gateway counts as alive from now, in milliseconds
-- ARGV[7]  the waiter's owner, or '': shown, with the time it took its place, by inspect
-- ARGV[8]  (with KEYS[5]) the claim id, or '' for none
-- ARGV[9]  (with KEYS[5]) the holder record after its fence field (`"owner":"pod-a"}`), or ''
--          for none: stored as `{"fence":<fence>,` .. ARGV[9]
--
-- A grant is announced on the channel `<KEYS[1]>:acquired`.
--
-- Returns fence                granted now: the token is `<stem>.<fence>`
--         {2, fence, pttl_ms}  already held by a token of this stem (an idempotent retry)
--         {4, pttl_ms, position, score}  queued, `position` from the head (1: next), while
--                              another token or readers hold the lock (pttl -1: no expiry)
--         {4, -2, position, score, head}  queued, the lock free but another waiter first:
--                              `head` is its member; if it is another of the caller's
--                              gateway's, that gateway takes the place out when its waiter
--                              is gone (an attempt that arrived after its leave, a failover
--                              that lost the leave: see fair_lines.rs)
--         {6}                  (idempotent acquires) held by a grant of the same idempotency
--                              key for another kind of grant (key_reused of grant.lua): no
--                              place is taken, and a place it had is left
--
-- The fence is next_fence() of grant.lua over the slot counter.
local queue, live, member = KEYS[3], KEYS[4], ARGV[3]
local time = redis.call('TIME')
local now = time_ms(time)
local holder = redis.call('GET', KEYS[1])
if holder then
  local ours = fence_text_of(holder, ARGV[1])
  if ours then
    if KEYS[5] and ARGV[8] ~= '' then
      redis.call('SET', KEYS[5], ARGV[8], 'PX', ARGV[2])
    end
    leave_queue(KEYS[1], queue, live, member, now)
    return {2, tonumber(ours), redis.call('PTTL', KEYS[1])}
  end
  if KEYS[5] and ARGV[8] ~= '' and key_reused(holder, ARGV[1]) then
    leave_queue(KEYS[1], queue, live, member, now)
    return {6}
  end
end
local score = enqueue(queue, live, member, tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[7], time,
  now, tonumber(ARGV[6]))
if holder then
  return {4, redis.call('PTTL', KEYS[1]), redis.call('ZRANK', queue, member) + 1, score}
end
local head = queue_head(queue, live, now)
if head ~= member then
  -- Free, and another waiter is first. Its gateway was told when it came first, and looks
  -- again within its re-check if that word was lost: telling it again here would cost a look
  -- for every newcomer arriving in the moment between a release and the next grant.
  -- The head's member as it is: the caller compares gateways (two string.match here cost
  -- Redis ~6 % of this call; bench/README.md).
  return {4, -2, redis.call('ZRANK', queue, member) + 1, score, head}
end
leave_queue(KEYS[1], queue, live, member, now)
local fence, text = next_fence(KEYS[2], time)
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[5] then
  if ARGV[8] ~= '' then
    redis.call('SET', KEYS[5], ARGV[8], 'PX', ARGV[2])
  end
  if ARGV[9] ~= '' then
    redis.call('SET', KEYS[6], holder_record(text, ARGV[9]), 'PX', ARGV[2])
  end
end
return fence
