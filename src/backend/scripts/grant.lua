-- Prelude: the rules of a grant, written once for every script that issues a fence,
-- recognises a token by its stem, or writes a holder record. Each such script is this file
-- followed by its own (see src/backend/redis/scripts.rs); only `local` names are defined here.
-- Raising a fence chosen elsewhere (Redlock's finalize, its one user) is raise_fence.lua.
--
-- Their Rust twins, which the memory backend and the gateway use: `next_fence` and `has_stem`
-- in src/backend/fence.rs, `Holder::record` in src/backend/holder.rs. tests/it/grant_rules.rs
-- runs these functions on a real server and the twins over the same inputs: a change to one
-- side alone fails it.
--
-- Lua numbers are doubles, exact up to 2^53: microsecond timestamps until the year 2255.

-- The fence of the next grant of the slot whose counter is `counter`, given Redis TIME `now`
-- (the reply of redis.call('TIME')):
--
--   fence = max(previous + 1, now in microseconds)
--
-- where `previous` is the counter. Advances the counter to the fence. Returns the fence and
-- its decimal text. acquire.lua writes this out (see there).
--
-- Written for the fewest calls on the common path (the clock ahead of the counter): the
-- clock's text is the fence's, and one SET ... GET both reads and advances the counter.
local function next_fence(counter, now)
  local text = now[1] .. string.sub('00000' .. now[2], -6)
  local fence = tonumber(text)
  local previous = tonumber(redis.call('SET', counter, text, 'GET'))
  if previous and previous >= fence then
    -- The counter is at or ahead of the clock (grants in the same microsecond, a clock that
    -- stepped back): the fence follows the counter.
    fence = previous + 1
    text = string.format('%.0f', fence)
    redis.call('SET', counter, text)
  end
  return fence, text
end

-- The fence text of `token` when it is a token of `stem` (`<stem>.<digits>`), else nil: the
-- one test of "this grant is ours" (an idempotent retry, a withdrawal, a finalization).
local function fence_text_of(token, stem)
  if string.sub(token, 1, #stem + 1) ~= stem .. '.' then
    return nil
  end
  local text = string.match(string.sub(token, #stem + 2), '^%d+$')
  -- At most 19 digits, as the gateway reads a token (src/backend/fence.rs, MAX_DIGITS).
  if text and #text <= 19 then
    return text
  end
  return nil
end

-- Whether `token` is a grant of the same idempotency key as `stem` for another kind of grant:
-- their first 22 characters (the HMAC of the name and the key, STEM_ENTROPY_CHARS in
-- src/backend/marks.rs) are the same, and the marks after them are not (another mode,
-- re-entry, hold bound, or holder record). Asked only by idempotent attempts: random stems
-- never share their entropy. Rust twin: `key_reused` in src/backend/fence.rs.
local function key_reused(token, stem)
  return #stem >= 22 and string.sub(token, 1, 22) == string.sub(stem, 1, 22)
    and not fence_text_of(token, stem)
end

-- The holder record of the grant with fence `text`: `fields` (the gateway's compact JSON
-- object after its opening brace, `"owner":"pod-a"}`) behind the fence field.
local function holder_record(text, fields)
  return '{"fence":' .. text .. ',' .. fields
end
