-- Prelude (after grant.lua) of the scripts that keep several leases of one name in a sorted set (semaphore
-- permits, read/write lock readers): the set holds tokens `<stem>.<fence>` scored by expiry
-- in ms (Redis TIME), and a hash beside it holds `claim:<stem>` (the attempt that last claimed
-- an idempotent grant) and `holder:<token>` (who holds it). Each such script is this file
-- followed by its own; only `local` names are defined here.

-- Redis TIME, and the same in milliseconds.
local function clock()
  local now = redis.call('TIME')
  return now, tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- The stem of a token.
local function stem_of(token)
  return string.match(token, '^(.*)%.')
end

-- Drops the leases of `set` that ended by `now_ms`, with their claims and holders.
local function reclaim(set, info, now_ms)
  local expired = redis.call('ZRANGEBYSCORE', set, '-inf', now_ms)
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', set, '-inf', now_ms)
    for _, token in ipairs(expired) do
      redis.call('HDEL', info, 'holder:' .. token, 'claim:' .. stem_of(token))
    end
  end
end

-- The reply of an idempotent retry, {2, fence, pttl}, if a lease of `stem` is in `held` (a
-- ZRANGE ... WITHSCORES reply); the retry's `claim` ('' for none) takes the grant over. An
-- idempotent attempt (a claim) whose key holds a lease of another kind of grant gets {6}
-- (key_reused of grant.lua), after the whole set is searched for a lease of its own.
local function found_again(held, info, stem, claim, now_ms)
  for i = 1, #held, 2 do
    local ours = fence_text_of(held[i], stem)
    if ours then
      if claim ~= '' then
        redis.call('HSET', info, 'claim:' .. stem, claim)
      end
      return {2, tonumber(ours), tonumber(held[i + 1]) - now_ms}
    end
  end
  if claim ~= '' then
    for i = 1, #held, 2 do
      if key_reused(held[i], stem) then
        return {6}
      end
    end
  end
  return nil
end

-- Adds the lease `<stem>.<fence text>` ending at `ends_ms`, with its claim and holder record
-- (each '' for none). Returns its token.
local function add(set, info, stem, text, ends_ms, claim, record)
  local token = stem .. '.' .. text
  redis.call('ZADD', set, ends_ms, token)
  if claim ~= '' then
    redis.call('HSET', info, 'claim:' .. stem, claim)
  end
  if record ~= '' then
    redis.call('HSET', info, 'holder:' .. token, holder_record(text, record))
  end
  return token
end

-- When the longest lease of `set` ends (ms), or nil for none.
local function last_end(set)
  return redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')[2]
end

-- Lets `set` and `info` live as long as the longest lease, `last` (ms).
local function expire_with(set, info, last)
  redis.call('PEXPIREAT', set, last)
  if redis.call('EXISTS', info) == 1 then
    redis.call('PEXPIREAT', info, last)
  end
end

-- The live leases of `set`, the first to end first: token, ms left, holder record or '', for
-- each (the gateway turns tokens into fences and shows nothing more of them).
local function live(set, info, now_ms)
  local held = redis.call('ZRANGEBYSCORE', set, '(' .. now_ms, '+inf', 'WITHSCORES')
  local out = {}
  for i = 1, #held, 2 do
    out[#out + 1] = held[i]
    out[#out + 1] = string.format('%.0f', tonumber(held[i + 1]) - now_ms)
    out[#out + 1] = redis.call('HGET', info, 'holder:' .. held[i]) or ''
  end
  return out
end

-- A new end, `ends_ms`, for the live lease `token`; false if it is not live.
local function extend(set, token, ends_ms, now_ms)
  local score = tonumber(redis.call('ZSCORE', set, token))
  if not score or score <= now_ms then
    return false
  end
  redis.call('ZADD', set, 'XX', ends_ms, token)
  return true
end

-- Removes the lease `token` with its claim and holder. Returns its end (ms), or nil if it
-- was not in the set.
local function remove(set, info, token)
  local score = tonumber(redis.call('ZSCORE', set, token))
  if score then
    redis.call('ZREM', set, token)
    redis.call('HDEL', info, 'holder:' .. token, 'claim:' .. stem_of(token))
  end
  return score
end

-- The token of `stem` in `set` if `claim` ('' for any) is still its last claim, else nil.
local function claimed(set, info, stem, claim)
  if claim ~= '' and redis.call('HGET', info, 'claim:' .. stem) ~= claim then
    return nil
  end
  for _, token in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    if fence_text_of(token, stem) then
      return token
    end
  end
  return nil
end

-- What a release script removes: the lease `token`, or, to withdraw one never delivered
-- (`token` ''), the lease of `stem` if `claim` ('' for any) is still its last. Returns the
-- removed lease's end (ms), or nil if there was none.
local function take_out(set, info, token, stem, claim)
  if token == '' then
    token = claimed(set, info, stem, claim)
    if not token then
      return nil
    end
  end
  return remove(set, info, token)
end
