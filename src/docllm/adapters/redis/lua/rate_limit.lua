-- rate_limit.lua: the fleet's LLM rate limit for one base URL and model (ARCHITECTURE.md, LLM boundary).
-- Not a queue script: lib.lua is not prepended and the queue's nine keys do not apply.
-- The same arithmetic as docllm.domain.rate_limits (decide, correct), which the contract tests
-- hold it to. Times are the authority's milliseconds (ARGV[2]); the script never calls TIME.
-- KEYS[1] the limit hash: rtat, ttat (GCRA arrival times of the request and token buckets),
--         hold (Retry-After: nobody sends before it), and the provider's budgets (Budget):
--         preq/ptok what remains as of preq_seen/ptok_seen, refilling at preq_rate/ptok_rate per
--         ms until preq_at/ptok_at; seen, the latest now a call brought
-- ARGV[1] op: 'acquire' | 'settle' | 'peek'
-- ARGV[2] now_ms
-- ARGV[3] rpm (0: off)   ARGV[4] tpm (0: off)
-- ARGV[5] acquire: the request's estimated tokens; settle: tokens used minus tokens charged
-- ARGV[6..12] settle only, '' when the provider did not say: remaining requests, their reset in
--         ms, remaining tokens, their reset in ms, retry-after in ms, request limit, token limit
-- Numbers beyond the bounds below (NaN, inf, negative, too big) are ignored, and a stored time past
-- HORIZON_MS ahead is forgotten: past them PEXPIRE fails and a wait overflows Redis's integers into
-- one read as "go now". A call further than STEP_BACK_MS behind seen moves every stored time back.
-- Returns: acquire: 0 when the request is charged, else the ms to wait, at most HORIZON_MS (nothing
--          charged; seen is stored all the same);
--          settle: 1; peek: the hash's twelve fields in the order below, as strings ('' unset).
local unpack = unpack or table.unpack -- Lua 5.1 (Redis) or 5.4 (some test servers)
local key, op = KEYS[1], ARGV[1]
local now, rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tokens = tonumber(ARGV[5]) or 0

local FIELDS = {'rtat', 'ttat', 'hold', 'preq', 'preq_seen', 'preq_rate', 'preq_at',
  'ptok', 'ptok_seen', 'ptok_rate', 'ptok_at', 'seen'}
local raw = redis.call('HMGET', key, unpack(FIELDS))
if op == 'peek' then
  for i = 1, #FIELDS do raw[i] = raw[i] or '' end
  return raw
end
-- The bounds of domain.rate_limits: MAX_RETRY_AFTER_S, MAX_RESET_S and MAX_COUNT, HORIZON_MS.
local MAX_RETRY_AFTER_MS, MAX_RESET_MS, MAX_COUNT, HORIZON_MS = 3600000, 86400000, 1e9, 86400000
-- A call whose now is more than STEP_BACK_MS behind seen comes after a backward step of the
-- authority's clock (ARCHITECTURE.md, Clocks): every stored time moves back by the step, so each
-- keeps its meaning (a wait is as long as it was at the last call before the step; clamping to a
-- furthest legitimate time would lose that: it lengthens a hold and fills an empty bucket). Not on
-- any smaller difference: the fleet's processes read the authority a few ms apart, and moving the
-- state back for each of those would give the laggard that much more room at every call, so the
-- fleet would drift past its limit; a caller that little behind only waits that much longer.
-- domain.rate_limits.STEP_BACK_MS (and clamp.lua's slack).
local STEP_BACK_MS = 1000

-- x when from 0 to hi, else nil (NaN fails both comparisons): domain.rate_limits.believed.
local function believed(x, hi)
  if x and x >= 0 and x <= hi then return x end
end

local s = {}
for i, name in ipairs(FIELDS) do s[name] = tonumber(raw[i]) end
s.rtat, s.ttat, s.hold = s.rtat or 0, s.ttat or 0, s.hold or 0
-- On now's clock (domain.rate_limits._on_this_clock); a seen beyond belief is not a step.
local seen = believed(s.seen, now + HORIZON_MS)
if seen and now < seen - STEP_BACK_MS then
  local shift = now - seen
  for _, name in ipairs({'rtat', 'ttat', 'hold', 'preq_seen', 'preq_at', 'ptok_seen', 'ptok_at'}) do
    if s[name] then s[name] = s[name] + shift end
  end
  seen = now
end
s.seen = math.max(seen or 0, now)
-- A time no settle can have stored is forgotten (domain.rate_limits._believable); NaN fails too.
for _, name in ipairs({'rtat', 'ttat', 'hold', 'preq_at', 'ptok_at'}) do
  if s[name] and not (s[name] <= now + HORIZON_MS) then s[name] = nil end
end
for _, b in ipairs({'preq', 'ptok'}) do
  if not s[b .. '_at'] then s[b], s[b .. '_seen'], s[b .. '_rate'] = nil, nil, nil end
end
s.rtat, s.ttat, s.hold = s.rtat or 0, s.ttat or 0, s.hold or 0

local request_ms, request_tol, token_ms, token_tol = 0, 0, 0, 0
local PACE = 0.97 -- domain.rate_limits.PACE: a little under the limit
if rpm > 0 then request_ms = 60000 / (rpm * PACE); request_tol = request_ms * math.max(1, rpm / 60) end
if tpm > 0 then token_ms = 60000 / (tpm * PACE); token_tol = 1000 end

-- The ms until the provider's budget `b` ('preq' or 'ptok') has `need` again (Budget.wait).
local function budget_wait(b, need)
  if not s[b] or s[b .. '_at'] <= now then return 0 end
  local short = need - (s[b] + s[b .. '_rate'] * (now - s[b .. '_seen']))
  if short <= 0 then return 0 end
  if s[b .. '_rate'] > 0 then return math.min(short / s[b .. '_rate'], s[b .. '_at'] - now) end
  return s[b .. '_at'] - now
end

-- The provider said `remaining` of `limit` ('' when unsaid) are left, full again in `reset` ms.
local function budget_said(b, remaining, reset, limit)
  remaining, reset, limit = believed(remaining, MAX_COUNT), believed(reset, MAX_RESET_MS), believed(limit, MAX_COUNT)
  if not remaining or not reset then return end
  local rate = 0
  if limit and limit > remaining and reset > 0 then rate = (limit - remaining) / reset end
  s[b], s[b .. '_seen'], s[b .. '_rate'], s[b .. '_at'] = remaining, now, rate, now + reset
end

local function save()
  local latest = math.max(s.rtat, s.ttat, s.hold, s.preq_at or 0, s.ptok_at or 0)
  local fields = {}
  for _, name in ipairs(FIELDS) do
    if s[name] then
      table.insert(fields, name)
      table.insert(fields, string.format('%.17g', s[name])) -- exact: the reference is in doubles too
    end
  end
  redis.call('HSET', key, unpack(fields))
  -- Forgotten a minute after the last time it names: an idle model leaves nothing behind.
  redis.call('PEXPIRE', key, math.floor(math.min(math.max(latest - now, 0), HORIZON_MS) + 60000))
end

if op == 'acquire' then
  if not (tokens >= 0) then tokens = 0 elseif tokens > MAX_COUNT then tokens = MAX_COUNT end
  local wait = math.max(0, s.hold - now, budget_wait('preq', 1), budget_wait('ptok', tokens))
  if request_ms > 0 then
    wait = math.max(wait, math.max(s.rtat, now) + request_ms - request_tol - now)
  end
  local cost = tokens * token_ms
  if token_ms > 0 then -- a request bigger than the bucket goes when it is empty, and owes the rest
    wait = math.max(wait, math.max(s.ttat, now) + math.min(cost, token_tol) - token_tol - now)
  end
  if wait > 0 then
    save()
    return math.ceil(math.min(wait, HORIZON_MS))
  end
  if request_ms > 0 then s.rtat = math.max(s.rtat, now) + request_ms end
  if token_ms > 0 then s.ttat = math.max(s.ttat, now) + cost end
  if s.preq then s.preq = s.preq - 1 end
  if s.ptok then s.ptok = s.ptok - tokens end
  save()
  return 0
end

if op == 'settle' then
  if token_ms > 0 and tokens ~= 0 and believed(math.abs(tokens), MAX_COUNT) then
    s.ttat = math.max(s.ttat + tokens * token_ms, now)
  end
  local retry_after = believed(tonumber(ARGV[10]), MAX_RETRY_AFTER_MS)
  if retry_after then s.hold = math.max(s.hold, now + retry_after) end
  budget_said('preq', tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[11]))
  budget_said('ptok', tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[12]))
  save()
  return 1
end
return redis.error_reply('rate_limit.lua: unknown op ' .. tostring(op))
