-- Prelude: the one rule for a token a client presents. A value that begins with '~' is an
-- internal marker of lockgate's (the readers' marker '~shared' stands in the lock key while
-- readers hold a name), never a holder's token, whatever a client sends: a script refuses it
-- before comparing, so that no client of the store (the gateway refuses markers before they
-- reach Redis; a plain Redis client may not) can move a lock with it.
local function is_marker(value)
  return string.byte(value, 1) == 126
end

