-- breaker.lua: the fleet's circuit breaker on the LLM provider (ARCHITECTURE.md, LLM boundary), decided on
-- the authority clock. lib.lua is prepended (its queue locals are unused here).
-- KEYS: 1 the breaker's hash (RedisKeys.breaker, in the queue's hash tag)
-- ARGV[1] op         record | view | probe | result
-- ARGV[2] now_ms     authority time
-- ARGV[3] window_ms  outcomes older than this no longer count
-- ARGV[4] ratio      failures / calls at or above which it opens
-- ARGV[5] min_calls  fewer outcomes in the window never open it
-- ARGV[6] open_ms    how long it stays open before a probe (and how long a probe lease lasts)
-- ARGV[7] ok         record, result: 1 the provider served, 0 it failed
-- ARGV[8] holder     probe, result: who probes
-- ARGV[9] count      record: how many outcomes (a process sends the successes that came while
--                    its previous record was on its way in one call)
-- The hash: state ("open"; absent = closed), opened_at, probe_at (next probe allowed from),
-- probe (lease holder), probe_until, last_ok, transitions, open_total (ms open before the current
-- opening), and per tenth of the window "ok:<n>" / "fail:<n>" counts. Half-open is not stored: it
-- is "open and probe_at has passed".
-- Returns {state, now, calls, failures, opened_at, probe_at, last_ok, transitions, open_total,
-- changed}; -1 for a time that is not set; changed: opened | reopened | probing | closed | "".
local B = KEYS[1]
local op, now = ARGV[1], tonumber(ARGV[2])
local window, ratio, min_calls, open_ms = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local span = math.max(1, math.floor(window / 10))
local bucket = math.floor(now / span)
local changed = ''

local function num(field)
  local v = redis.call('HGET', B, field)
  return v and tonumber(v) or nil
end

-- Counts of the live buckets; stale ones (older than the window, or ahead of now after the clock
-- stepped back) are deleted, so the hash stays at most ~20 count fields.
local function window_counts()
  local calls, failures = 0, 0
  local fields = redis.call('HKEYS', B)
  for _, f in ipairs(fields) do
    local kind, n = string.match(f, '^(%a+):(%d+)$')
    if kind then
      n = tonumber(n)
      if n <= bucket - 10 or n > bucket then
        redis.call('HDEL', B, f)
      else
        local c = tonumber(redis.call('HGET', B, f))
        calls = calls + c
        if kind == 'fail' then failures = failures + c end
      end
    end
  end
  return calls, failures
end

local function clear_window()
  for _, f in ipairs(redis.call('HKEYS', B)) do
    if string.match(f, '^%a+:%d+$') then redis.call('HDEL', B, f) end
  end
end

local is_open = redis.call('HGET', B, 'state') == 'open'
-- A backward step of the clock must not keep it open for the step's length: no probe is ever
-- legitimately due more than open_ms ahead (the same rule as clamp.lua's).
if is_open then
  local due = num('probe_at') or now
  if due > now + open_ms then redis.call('HSET', B, 'probe_at', now + open_ms) end
  local lease = num('probe_until')
  if lease and lease > now + open_ms then redis.call('HSET', B, 'probe_until', now + open_ms) end
end

if op == 'record' then
  local field = (ARGV[7] == '1' and 'ok:' or 'fail:') .. string.format('%d', bucket)
  redis.call('HINCRBY', B, field, tonumber(ARGV[9]) or 1)
  if ARGV[7] == '1' then redis.call('HSET', B, 'last_ok', now) end
  if not is_open and ARGV[7] ~= '1' then
    local calls, failures = window_counts()
    if calls >= min_calls and failures >= ratio * calls then
      redis.call('HSET', B, 'state', 'open', 'opened_at', now, 'probe_at', now + open_ms)
      redis.call('HINCRBY', B, 'transitions', 1)
      is_open, changed = true, 'opened'
    end
  end
elseif op == 'probe' then
  if is_open and (num('probe_at') or now) <= now then
    local holder, lease = redis.call('HGET', B, 'probe'), num('probe_until')
    if not holder or not lease or lease < now then
      redis.call('HSET', B, 'probe', ARGV[8], 'probe_until', now + open_ms)
      changed = 'probing'
    end
  end
elseif op == 'result' then
  if is_open and redis.call('HGET', B, 'probe') == ARGV[8] then
    redis.call('HDEL', B, 'probe', 'probe_until')
    redis.call('HINCRBY', B, 'transitions', 1)
    if ARGV[7] == '1' then
      local opened = num('opened_at') or now
      redis.call('HINCRBY', B, 'open_total', math.max(0, now - opened))
      redis.call('HDEL', B, 'state', 'opened_at', 'probe_at')
      redis.call('HSET', B, 'last_ok', now)
      clear_window()  -- a fresh start: the outage's failures must not reopen it at once
      is_open, changed = false, 'closed'
    else
      redis.call('HSET', B, 'probe_at', now + open_ms)
      changed = 'reopened'
    end
  end
end

local calls, failures = window_counts()
local state = 'closed'
if is_open then
  state = ((num('probe_at') or now) <= now) and 'half_open' or 'open'
end
local function t(v) return v or -1 end
return {state, now, calls, failures, t(is_open and num('opened_at') or nil), t(is_open and num('probe_at') or nil),
  t(num('last_ok')), num('transitions') or 0, num('open_total') or 0, changed}
