-- Prelude: the one rule for a token a client presents. A value that begins with '~' is an
-- internal marker of lockgate's (the readers' marker '~shared' stands in the lock key while
-- readers hold a name), never a holder's token, whatever a client sends: a script refuses it
-- before comparing, so that no client of the store (the gateway refuses markers before they
-- reach Redis; a plain Redis client may not) can move a lock with it.
local function is_marker(value)
  return string.byte(value, 1) == 126
end

-- Whether the token a client presents holds the lock `key`: 1 it does, 0 nobody holds it, -1
-- another token does (or `token` is a marker, which holds nothing). The one compare of every
-- script that acts on a presented token but the plain release, which writes it out (see
-- release.lua for why).
local function held_by(key, token)
  local value = redis.call('GET', key)
  if not value then
    return 0
  end
  if value ~= token or is_marker(token) then
    return -1
  end
  return 1
end
