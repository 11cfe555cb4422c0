-- Multi-lock release: delete every lock of the set the token holds (ARGV[1]), or withdraw the
-- set of a stem that was never delivered (ARGV[1] empty, ARGV[2] the stem, ARGV[3] the claim
-- that must still be the set's last, or ''). Each release is announced on
-- `<lock key>:released`, as release.lua's.
--
-- KEYS[1]  the claim key of the set's first name
-- KEYS[2], KEYS[3], ...  per name: its lock key, then its holder key
--
-- Returns (release) 1 every name was held, 0 none was (or only some, which are deleted),
--         -1 a name is held by another token (nothing is deleted);
--         (withdraw) 1 withdrawn, 0 nothing of this attempt's was held.
local withdraw = ARGV[1] == ''
if withdraw and ARGV[3] ~= '' then
  if redis.call('GET', KEYS[1]) ~= ARGV[3] then
    return 0
  end
end
local held, mine = {}, 0
for i = 2, #KEYS, 2 do
  local value = redis.call('GET', KEYS[i])
  if value then
    local ours
    if withdraw then
      ours = fence_text_of(value, ARGV[2]) ~= nil
    else
      ours = value == ARGV[1] and not is_marker(ARGV[1])
    end
    if ours then
      mine = mine + 1
      held[#held + 1] = i
    elseif not withdraw then
      return -1
    end
  end
end
for _, i in ipairs(held) do
  redis.call('DEL', KEYS[i], KEYS[i + 1])
  redis.call('PUBLISH', KEYS[i] .. ':released', '')
end
if mine > 0 and withdraw then
  redis.call('DEL', KEYS[1])
  return 1
end
if mine * 2 == #KEYS - 1 then
  return 1
end
return 0
