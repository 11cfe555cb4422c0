-- Prelude of finalize.lua (after grant.lua), its one user: Redlock's raising of the fence.
-- Kept out of grant.lua so that the scripts every plain grant runs do not define it on every
-- run (bench/README.md, "What a lock costs Redis").

-- Lifts the slot counter `counter` to the fence `text` chosen elsewhere (Redlock: the largest
-- any granting node issued), so that this node's next fence exceeds it.
local function raise_fence(counter, text)
  if (tonumber(redis.call('GET', counter)) or 0) < tonumber(text) then
    redis.call('SET', counter, text)
  end
end
