-- lib.lua: helpers prepended to every queue script by redis_queue.py (a script cannot include
-- another). Scripts never call TIME: the adapter passes the authority's now_ms.
-- KEYS (the same eleven in every script, RedisKeys.script_keys):
--   1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed, 6 dead, 7 processing_ts,
--   8 staging, 9 staging_seen, 10 clock, 11 cancelled
local READY, PROCESSING, LEASE_INDEX, LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local DELAYED, DEAD, PROCESSING_TS = KEYS[5], KEYS[6], KEYS[7]
local STAGING, STAGING_SEEN, CLOCK = KEYS[8], KEYS[9], KEYS[10]
local CANCELLED = KEYS[11]
-- Lanes and tenants (lanes.lua, prepended after this file) fill these in: where a payload goes.
local route, route_of, count_in_flight

-- Steps of the authority clock (DESIGN section 6: an NTP step, a VM resume, a failover to a host
-- whose clock is elsewhere). A process's clock (redis_clock.py) sees a step when TIME disagrees
-- with its monotonic clock, and records it here (clock_step.lua) before it hands the new time to
-- anyone: a quiet window of one lease from the step, on the old clock and on the new one, since
-- processes that have not re-read TIME yet still count on the old one. No lease is reclaimed by a
-- caller whose time falls in a window, and a lease that was live before the step (its deadline
-- past the window's floor) may still be renewed, so every live worker renews on the new clock
-- first. The windows live in Redis: every process agrees on them whatever its own schedule.
-- Entries "from:until:floor" of the list CLOCK, newest first (windows of different clocks cannot
-- be ordered by time). Mirrored by adapters/clock_steps.py.

-- The lowest floor of the quiet windows `now` falls in, or nil when reclaims may go on.
local function clock_quiet(now)
  local lowest = nil
  for _, w in ipairs(redis.call('LRANGE', CLOCK, 0, -1)) do
    local from, until_ms, floor = string.match(w, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
    from, until_ms, floor = tonumber(from), tonumber(until_ms), tonumber(floor)
    if from <= now and now < until_ms and (lowest == nil or floor < lowest) then lowest = floor end
  end
  return lowest
end

-- Whether a lease with this deadline may be renewed at `now`: it has not expired, or it expired
-- only because the clock stepped under it.
local function renewable(deadline, now)
  if deadline >= now then return true end
  local floor = clock_quiet(now)
  return floor ~= nil and deadline > floor
end

-- The task id a payload names: one rule, written twice, here and in domain/payload.py (read the
-- rule there); tests/property/test_payload_agreement.py runs both on generated payloads, here
-- through the scripts on fakeredis and on a real redis-server. cjson is not used: it reads every
-- number as a double (3.0, 1e2 and 3 are one value to it) and, in Redis, also takes 0x10, 01, 1.,
-- inf and bytes that are not UTF-8, so the raw text is read instead.

local MAX_TASK_ID = 2 ^ 53 - 1  -- the largest integer a double (cjson, lease data) holds exactly

-- Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF).
local function utf8_ok(s)
  local i = string.find(s, '[\128-\255]')
  while i do
    local c, n, lo, hi = string.byte(s, i), 2, 0x80, 0xBF
    if c >= 0xC2 and c <= 0xDF then n = 1
    elseif c == 0xE0 then lo = 0xA0
    elseif c == 0xED then hi = 0x9F
    elseif c >= 0xE1 and c <= 0xEF then n = 2
    elseif c == 0xF0 then n, lo = 3, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then n = 3
    elseif c == 0xF4 then n, hi = 3, 0x8F
    else return false end
    local b = string.byte(s, i + 1)
    if not b or b < lo or b > hi then return false end
    for k = 2, n do
      b = string.byte(s, i + k)
      if not b or b < 0x80 or b > 0xBF then return false end
    end
    i = string.find(s, '[\128-\255]', i + n + 1)
  end
  return true
end

-- The index of the first byte at or after `i` that is not JSON whitespace.
local function skip_ws(s, i)
  return string.find(s, '[^ \t\n\r]', i) or #s + 1
end

-- The index just past the JSON string starting at `i` (a '"'), or nil. Escapes must be valid and
-- a \u escape of a surrogate must be half of a pair.
local function string_end(s, i)
  if string.sub(s, i, i) ~= '"' then return nil end
  while true do
    i = string.find(s, '[%z\1-\31"\\]', i + 1)
    if not i or string.byte(s, i) < 32 then return nil end
    if string.sub(s, i, i) == '"' then return i + 1 end
    local e = string.sub(s, i + 1, i + 1)
    if string.find(e, '^["\\/bfnrt]$') then
      i = i + 1
    elseif e == 'u' and string.find(s, '^%x%x%x%x', i + 2) then
      local code = tonumber(string.sub(s, i + 2, i + 5), 16)
      if code >= 0xDC00 and code <= 0xDFFF then return nil end
      if code >= 0xD800 and code <= 0xDBFF then
        if not string.find(s, '^\\u[dD][c-fC-F]%x%x', i + 6) then return nil end
        i = i + 6
      end
      i = i + 5
    else
      return nil
    end
  end
end

-- The index just past the JSON number or literal starting at `i`, or nil.
local function scalar_end(s, i)
  for _, word in ipairs({'true', 'false', 'null'}) do
    if string.sub(s, i, i + #word - 1) == word then return i + #word end
  end
  local _, e = string.find(s, '^-?0', i)
  if not e then _, e = string.find(s, '^-?[1-9]%d*', i) end
  if not e then return nil end
  if string.sub(s, e + 1, e + 1) == '.' then
    _, e = string.find(s, '^%d+', e + 2)
    if not e then return nil end
  end
  if string.find(s, '^[eE]', e + 1) then
    _, e = string.find(s, '^[+-]?%d+', e + 2)
    if not e then return nil end
  end
  return e + 1
end

-- The index just past `"key" :` and the whitespace after it, starting at `i`, or nil.
local function key_end(s, i)
  local e = string_end(s, i)
  if not e then return nil end
  e = skip_ws(s, e)
  if string.sub(s, e, e) ~= ':' then return nil end
  return skip_ws(s, e + 1)
end

-- The index just past the JSON value starting at `i`, or nil. Containers are followed with a
-- stack of the closers expected, not by recursion: any depth is fine.
local function value_end(s, i)
  local closers = {}
  while true do
    local c = string.sub(s, i, i)
    local opened = false
    if c == '{' or c == '[' then
      local close = c == '{' and '}' or ']'
      i = skip_ws(s, i + 1)
      if string.sub(s, i, i) == close then
        i = i + 1
      else
        closers[#closers + 1] = close
        if close == '}' then i = key_end(s, i) end
        opened = true
      end
    elseif c == '"' then
      i = string_end(s, i)
    else
      i = scalar_end(s, i)
    end
    if not i then return nil end
    while not opened do  -- a value is complete: close what it completes, or move to the next one
      if #closers == 0 then return i end
      i = skip_ws(s, i)
      c = string.sub(s, i, i)
      if c == closers[#closers] then
        closers[#closers] = nil
        i = i + 1
      elseif c == ',' then
        i = skip_ws(s, i + 1)
        if closers[#closers] == '}' then i = key_end(s, i) end
        if not i then return nil end
        opened = true
      else
        return nil
      end
    end
  end
end

-- The raw value tokens of the payload's last top-level members written "task_id", "priority" and
-- "tenant" (keys are compared as written), by those names; nil when the payload is not a JSON
-- object. One pass reads all three.
local WANTED = {['"task_id"'] = 'task_id', ['"priority"'] = 'priority', ['"tenant"'] = 'tenant'}
local function member_tokens(raw)
  if not utf8_ok(raw) then return nil end
  local i, found = skip_ws(raw, 1), {}
  if string.sub(raw, i, i) ~= '{' then return nil end
  i = skip_ws(raw, i + 1)
  if string.sub(raw, i, i) == '}' then return found end
  while true do
    local v = key_end(raw, i)
    if not v then return nil end
    local e = value_end(raw, v)
    if not e then return nil end
    local name = WANTED[string.sub(raw, i, string_end(raw, i) - 1)]
    if name then found[name] = string.sub(raw, v, e - 1) end
    i = skip_ws(raw, e)
    local c = string.sub(raw, i, i)
    if c == '}' then break end
    if c ~= ',' then return nil end
    i = skip_ws(raw, i + 1)
  end
  if skip_ws(raw, i + 1) <= #raw then return nil end
  return found
end

-- The raw value token of the payload's "task_id" member, or nil.
local function task_id_token(raw)
  local found = member_tokens(raw)
  return found and found.task_id
end

-- The task id a payload names, in decimal without leading zeros, or nil for a malformed one. A
-- malformed payload is still leased (its caller dead-letters it), so nothing here may raise.
local function task_id_of(raw)
  local token = task_id_token(raw)
  if not token then return nil end
  local digits = string.match(token, '^[1-9]%d*$')
  if not digits then
    local text = string.match(token, '^"(.*)"$')
    text = text and string.gsub(text, '\\[tnr]', ' ')
    digits = text and string.match(text, '^ *0*([1-9]%d*) *$')
  end
  if not digits or #digits > 16 or tonumber(digits) > MAX_TASK_ID then return nil end
  return digits
end

-- Whether an operator cancelled the task `raw` names (docllm cancel): its claimer fails it at once.
local function cancelled(raw)
  local task_id = task_id_of(raw)
  return task_id ~= nil and redis.call('HEXISTS', CANCELLED, task_id) == 1
end

-- Move up to `limit` delayed payloads due at `now` (inclusive) to the far end of their lane's
-- ready list (lanes.lua), oldest due first. Returns how many moved.
local function promote(now, limit)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit)
  for _, raw in ipairs(due) do
    route(raw, false)
    redis.call('ZREM', DELAYED, raw)
  end
  return #due
end

-- The decoded lease of `token`, or nil when the token holds none. No script writes an index
-- entry without lease data; should one appear anyway, nothing can be recovered from it, so it
-- is removed on sight.
local function lease_of(token)
  if not redis.call('ZSCORE', LEASE_INDEX, token) then return nil end
  local data = redis.call('HGET', LEASES, token)
  if not data then
    redis.call('ZREM', LEASE_INDEX, token)
    return nil
  end
  return cjson.decode(data)
end

-- End the lease of `token`: its payload leaves processing with it. Returns the lease or nil.
local function take_lease(token)
  local lease = lease_of(token)
  if not lease then return nil end
  -- From the tail: processing is in claim order, and the oldest leases are the usual ones to end.
  redis.call('LREM', PROCESSING, -1, lease.raw)
  redis.call('ZREM', LEASE_INDEX, token)
  redis.call('HDEL', LEASES, token)
  if type(lease.task_id) == 'number' then
    redis.call('HDEL', PROCESSING_TS, string.format('%d', lease.task_id))
  end
  if not lease.uncounted then count_in_flight(lease.tenant, -1) end
  return lease
end

-- Put `raw` into processing under a new lease `token` held by `holder` until now + lease_ms.
-- `uncounted`: a batch lane member's, which its tenant's cap does not count (lanes.lua).
local function lease(raw, token, holder, now, lease_ms, uncounted)
  redis.call('LPUSH', PROCESSING, raw)
  local task_id = task_id_of(raw)
  local _, tenant = route_of(raw)
  local data = {raw = raw, holder = holder, claimed_at = now, task_id = tonumber(task_id), tenant = tenant}
  if uncounted then
    data.uncounted = true
  else
    count_in_flight(tenant, 1)
  end
  redis.call('HSET', LEASES, token, cjson.encode(data))
  redis.call('ZADD', LEASE_INDEX, now + lease_ms, token)
  if task_id then
    -- The original note's display hash: claim time in whole seconds.
    redis.call('HSET', PROCESSING_TS, task_id, math.floor(now / 1000))
  end
end
