-- Shared inspect: the live readers, without changing anything. (After lease_set.lua.)
--
-- KEYS[1]  the readers (see shared_acquire.lua)
-- KEYS[2]  the readers' hash
--
-- Returns lease_set.lua's live() list.
local _, now_ms = clock()
return live(KEYS[1], KEYS[2], now_ms)
