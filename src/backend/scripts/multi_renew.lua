-- Multi-lock renew: a new ttl on every lock of the set, if the token holds them all.
--
-- KEYS[1], KEYS[2], ...  per name: its lock key, then its holder key
-- ARGV[1]  token
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 renewed, 0 not held (a name is free), -1 a name is held by another token.
for i = 1, #KEYS, 2 do
  local held = held_by(KEYS[i], ARGV[1])
  if held ~= 1 then
    return held
  end
end
for i = 1, #KEYS, 2 do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
  redis.call('PEXPIRE', KEYS[i + 1], ARGV[2])
end
return 1
