-- budget.lua: the spend ledger (domain/ledger.py, I14 and I16): the fleet's LLM spend of one day,
-- each deployment's share of it, and the reservations in flight, against the fleet's cap and each
-- deployment's, in the queue's hash tag. lib.lua is prepended (its queue locals are unused here).
-- KEYS: 1 the day's spend in micro-dollars (RedisKeys.spend(day): the day is the authority
--         clock's, so the count rolls over with the key), 2 the fleet's cap (RedisKeys.spend_cap),
--       3 the day's spend per deployment, name -> micro-dollars (RedisKeys.spend_by_deployment(day)),
--       4 the reservations, key -> "micro|deployment" (spend_held), 5 the same scored by the ms
--         they lapse at (spend_held_until), 6 what they hold per deployment (spend_held_by_deployment)
-- ARGV[1] op  view | add | reserve | settle
-- ARGV[2] keep_ms  how long the day's counts live after their last add
-- ARGV[3] now_ms   the authority's now: reservations past their deadline are let go first
-- add:     ARGV[4..] pairs of deployment name, micro-dollars spent there ('': the fleet's count alone)
-- reserve: ARGV[4] key, 5 deployment, 6 micro, 7 deadline ms, 8 the setting's fleet cap (-1: none),
--          9 the deployment's cap (-1: none). Granted only when it fits under both caps: the day's
--          spend + what is held + this <= cap. A key already held is granted again, unchanged.
-- settle:  ARGV[4..] items: key ('' for none), release (1: the hold goes whatever is left of it),
--          n, then n pairs of deployment, micro spent. Each amount is counted (the write it comes
--          from landed) and taken off the key's hold; a key no longer held (released, lapsed) counts
--          the same and takes off nothing.
-- Returns {granted (1, 0 for no, -1 not asked), refused by ('fleet', 'deployment' or ''), spent,
-- fleet cap in Redis (-1: none, the setting's rule), {name, micro spent, ...}, held in all,
-- {name, micro held, ...}}.
local HELD, UNTIL, HELD_BY = KEYS[4], KEYS[5], KEYS[6]
local keep, now = tonumber(ARGV[2]), tonumber(ARGV[3])

local function forget(key)
  local entry = redis.call('HGET', HELD, key)
  if not entry then return nil end
  local amount, dep = string.match(entry, '^(%d+)|(.*)$')
  amount = tonumber(amount)
  if amount > 0 then redis.call('HINCRBY', HELD_BY, dep, -amount) end
  redis.call('HDEL', HELD, key)
  redis.call('ZREM', UNTIL, key)
  return amount, dep
end

-- Reservations past their deadline (a process that died holding one) are let go, a bounded few a call.
for _, key in ipairs(redis.call('ZRANGEBYSCORE', UNTIL, '-inf', now, 'LIMIT', 0, 64)) do
  forget(key)
end

local function count(dep, amount)
  if amount <= 0 then return end
  redis.call('INCRBY', KEYS[1], amount)
  redis.call('PEXPIRE', KEYS[1], keep)
  if dep ~= '' then
    redis.call('HINCRBY', KEYS[3], dep, amount)
    redis.call('PEXPIRE', KEYS[3], keep)
  end
end

local function held_in_all()
  local total = 0
  local flat = redis.call('HGETALL', HELD_BY)
  for i = 2, #flat, 2 do total = total + math.max(0, tonumber(flat[i])) end
  return total
end

local granted, refused = -1, ''
local op = ARGV[1]
if op == 'add' then
  for i = 4, #ARGV - 1, 2 do count(ARGV[i], tonumber(ARGV[i + 1])) end
elseif op == 'reserve' then
  local key, dep, amount = ARGV[4], ARGV[5], tonumber(ARGV[6])
  if redis.call('HEXISTS', HELD, key) == 1 then
    granted = 1
  else
    local cap = redis.call('GET', KEYS[2])
    cap = cap and tonumber(cap) or tonumber(ARGV[8])
    if cap == 0 and redis.call('EXISTS', KEYS[2]) == 1 then cap = -1 end  -- the fleet's 0: off
    local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
    local dep_cap = tonumber(ARGV[9])
    granted = 1
    if cap >= 0 and spent + held_in_all() + amount > cap then
      granted, refused = 0, 'fleet'
    elseif dep_cap >= 0 then
      local dep_spent = tonumber(redis.call('HGET', KEYS[3], dep) or '0')
      local dep_held = math.max(0, tonumber(redis.call('HGET', HELD_BY, dep) or '0'))
      if dep_spent + dep_held + amount > dep_cap then granted, refused = 0, 'deployment' end
    end
    if granted == 1 and amount > 0 then
      redis.call('HSET', HELD, key, amount .. '|' .. dep)
      redis.call('ZADD', UNTIL, tonumber(ARGV[7]), key)
      redis.call('HINCRBY', HELD_BY, dep, amount)
    end
  end
elseif op == 'settle' then
  local i = 4
  while i <= #ARGV do
    local key, release, n = ARGV[i], ARGV[i + 1] == '1', tonumber(ARGV[i + 2])
    local spent_here = 0
    for j = i + 3, i + 2 + 2 * n, 2 do
      local amount = tonumber(ARGV[j + 1])
      count(ARGV[j], amount)
      spent_here = spent_here + amount
    end
    i = i + 3 + 2 * n
    if key ~= '' then
      local deadline = redis.call('ZSCORE', UNTIL, key)
      local held, dep = forget(key)
      if held and not release and held > spent_here then  -- what is left stays held
        local left = held - spent_here
        redis.call('HSET', HELD, key, left .. '|' .. dep)
        redis.call('HINCRBY', HELD_BY, dep, left)
        redis.call('ZADD', UNTIL, deadline or now + keep, key)
      end
    end
  end
end
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local fleet = redis.call('GET', KEYS[2])
local held_by = {}
local flat = redis.call('HGETALL', HELD_BY)
for i = 1, #flat, 2 do
  if tonumber(flat[i + 1]) > 0 then
    held_by[#held_by + 1] = flat[i]
    held_by[#held_by + 1] = flat[i + 1]
  end
end
return {granted, refused, spent, fleet and tonumber(fleet) or -1, redis.call('HGETALL', KEYS[3]), held_in_all(), held_by}
