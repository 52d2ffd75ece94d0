-- rate_limit.lua: the fleet's LLM rate limit for one base URL and model (DESIGN section 11).
-- Not a queue script: lib.lua is not prepended and the queue's nine keys do not apply.
-- The same arithmetic as docllm.domain.rate_limits (decide, correct), which the contract tests
-- hold it to. Times are the authority's milliseconds (ARGV[2]); the script never calls TIME.
-- KEYS[1] the limit hash: rtat, ttat (GCRA arrival times of the request and token buckets),
--         hold (Retry-After: nobody sends before it), preq/preq_at and ptok/ptok_at (what the
--         provider said remains, until when)
-- ARGV[1] op: 'acquire' | 'settle' | 'peek'
-- ARGV[2] now_ms
-- ARGV[3] rpm (0: off)   ARGV[4] tpm (0: off)
-- ARGV[5] acquire: the request's estimated tokens; settle: tokens used minus tokens charged
-- ARGV[6..10] settle only, '' when the provider did not say: remaining requests, their reset in
--         ms, remaining tokens, their reset in ms, retry-after in ms
-- Returns: acquire: 0 when the request is charged, else the ms to wait (nothing charged);
--          settle: 1; peek: {rtat, ttat, hold, preq, preq_at, ptok, ptok_at} as strings ('' unset).
local unpack = unpack or table.unpack -- Lua 5.1 (Redis) or 5.4 (some test servers)
local key, op = KEYS[1], ARGV[1]
local now, rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tokens = tonumber(ARGV[5]) or 0

local raw = redis.call('HMGET', key, 'rtat', 'ttat', 'hold', 'preq', 'preq_at', 'ptok', 'ptok_at')
if op == 'peek' then
  for i = 1, 7 do raw[i] = raw[i] or '' end
  return raw
end
local s = {rtat = tonumber(raw[1]) or 0, ttat = tonumber(raw[2]) or 0, hold = tonumber(raw[3]) or 0,
  preq = tonumber(raw[4]), preq_at = tonumber(raw[5]) or 0, ptok = tonumber(raw[6]), ptok_at = tonumber(raw[7]) or 0}

local request_ms, request_tol, token_ms, token_tol = 0, 0, 0, 0
if rpm > 0 then request_ms = 60000 / rpm; request_tol = request_ms * math.max(1, rpm / 60) end
if tpm > 0 then token_ms = 60000 / tpm; token_tol = 1000 end

local function fmt(x) return string.format('%.3f', x) end

local function save()
  local latest = math.max(s.rtat, s.ttat, s.hold, s.preq_at, s.ptok_at)
  local fields = {'rtat', fmt(s.rtat), 'ttat', fmt(s.ttat), 'hold', fmt(s.hold),
    'preq_at', fmt(s.preq_at), 'ptok_at', fmt(s.ptok_at)}
  if s.preq then table.insert(fields, 'preq'); table.insert(fields, fmt(s.preq)) end
  if s.ptok then table.insert(fields, 'ptok'); table.insert(fields, fmt(s.ptok)) end
  redis.call('HSET', key, unpack(fields))
  -- Forgotten a minute after the last time it names: an idle model leaves nothing behind.
  redis.call('PEXPIRE', key, math.floor(math.max(latest - now, 0) + 60000))
end

if op == 'acquire' then
  local wait = 0
  if s.hold > now then wait = s.hold - now end
  if s.preq and s.preq_at > now and s.preq < 1 then wait = math.max(wait, s.preq_at - now) end
  if s.ptok and s.ptok_at > now and s.ptok < tokens then wait = math.max(wait, s.ptok_at - now) end
  if request_ms > 0 then
    wait = math.max(wait, math.max(s.rtat, now) + request_ms - request_tol - now)
  end
  local cost = tokens * token_ms
  if token_ms > 0 then -- a request bigger than the bucket goes when it is empty, and owes the rest
    wait = math.max(wait, math.max(s.ttat, now) + math.min(cost, token_tol) - token_tol - now)
  end
  if wait > 0 then return math.ceil(wait) end
  if request_ms > 0 then s.rtat = math.max(s.rtat, now) + request_ms end
  if token_ms > 0 then s.ttat = math.max(s.ttat, now) + cost end
  if s.preq then s.preq = s.preq - 1 end
  if s.ptok then s.ptok = s.ptok - tokens end
  save()
  return 0
end

if op == 'settle' then
  if token_ms > 0 and tokens ~= 0 then s.ttat = math.max(s.ttat + tokens * token_ms, now) end
  local remaining_requests, reset_requests = tonumber(ARGV[6]), tonumber(ARGV[7])
  local remaining_tokens, reset_tokens, retry_after = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  if retry_after then s.hold = math.max(s.hold, now + retry_after) end
  if remaining_requests and reset_requests then s.preq = remaining_requests; s.preq_at = now + reset_requests end
  if remaining_tokens and reset_tokens then s.ptok = remaining_tokens; s.ptok_at = now + reset_tokens end
  save()
  return 1
end
return redis.error_reply('rate_limit.lua: unknown op ' .. tostring(op))
