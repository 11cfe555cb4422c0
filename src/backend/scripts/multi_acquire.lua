-- Multi-lock acquire: every lock of a set for one token, or none (see src/backend/multi.rs).
--
-- KEYS[1]  the fence counter every name of the set shares (the server's, or their slot's)
-- KEYS[2]  the claim key of the set's first name (idempotent acquires)
-- KEYS[3], KEYS[4], ...  per name: its lock key, then its holder key
-- ARGV[1]  the token stem
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  the claim id, or '' for none
-- ARGV[4]  the holder record after its fence field (`"owner":"pod-a"}`), or '' for none
--
-- Each grant is announced on `<lock key>:acquired`, as acquire.lua's.
--
-- Returns fence                granted now: every lock key holds `<stem>.<fence>`
--         {2, fence, pttl_ms}  a token of this stem holds every name (an idempotent retry)
--         {0, pttl_ms}         a name is held by another token (or by this set in part)
--         {6}                  (idempotent acquires) a name is held by a grant of the same
--                              idempotency key for another kind of grant (key_reused)
local mine, found, found_fence = 0, nil, nil
for i = 3, #KEYS, 2 do
  local value = redis.call('GET', KEYS[i])
  if value then
    local ours = fence_text_of(value, ARGV[1])
    if not ours then
      if ARGV[3] ~= '' and key_reused(value, ARGV[1]) then
        return {6}
      end
      return {0, redis.call('PTTL', KEYS[i])}
    end
    mine, found, found_fence = mine + 1, KEYS[i], ours
  end
end
if found then
  if mine * 2 < #KEYS - 2 then
    -- Part of this set, running out: held until it has.
    return {0, redis.call('PTTL', found)}
  end
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  end
  return {2, tonumber(found_fence), redis.call('PTTL', found)}
end
local fence, text = next_fence(KEYS[1], redis.call('TIME'))
local token = ARGV[1] .. '.' .. text
for i = 3, #KEYS, 2 do
  redis.call('SET', KEYS[i], token, 'PX', ARGV[2])
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[i + 1], holder_record(text, ARGV[4]), 'PX', ARGV[2])
  end
  redis.call('PUBLISH', KEYS[i] .. ':acquired', '')
end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
end
return fence
