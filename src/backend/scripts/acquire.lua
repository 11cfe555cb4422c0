-- Acquire: take the lock if it is free (SET NX PX semantics) and issue a fence, atomically.
--
-- KEYS[1]  the lock key; its value is exactly the holder's token, `<stem>.<fence>`
-- KEYS[2]  the fence counter of the name's hash slot (same slot as KEYS[1])
-- KEYS[3]  the name's fence counter as lockgate kept it before the fence-in-token format:
--          read once, superseded by KEYS[2], then deleted
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
--         {0, pttl_ms, 1}      held by readers (the value is the marker '~shared', see
--                              shared_acquire.lua)
--
-- The fence is next_fence() of grant.lua over the slot counter and the old per-name counter.
local holder = redis.call('GET', KEYS[1])
if holder then
  local ours = fence_text_of(holder, ARGV[1])
  if ours then
    if KEYS[4] and ARGV[3] ~= '' then
      redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
    end
    return {2, tonumber(ours), redis.call('PTTL', KEYS[1])}
  end
  if holder == '~shared' then
    return {0, redis.call('PTTL', KEYS[1]), 1}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local fence, text = next_fence(KEYS[2], redis.call('TIME'), KEYS[3])
redis.call('SET', KEYS[1], ARGV[1] .. '.' .. text, 'PX', ARGV[2])
-- Announced to gateways watching the name (GET /locks/{name}/events).
redis.call('PUBLISH', KEYS[1] .. ':acquired', '')
if KEYS[4] then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[2])
  end
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[5], holder_record(text, ARGV[4]), 'PX', ARGV[2])
  end
end
return fence
