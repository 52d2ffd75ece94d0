-- lanes.lua: lanes and tenants (issue 26, I13), prepended after lib.lua to every queue script.
-- KEYS 12..24 (RedisKeys.script_keys): 12 ready:interactive, 13 ready:bulk (the default lane's
-- list is READY, KEYS[1], so the original producers' LPUSH lands there); 14..16 the tenant rings of
-- interactive, default, bulk (lists of tenants with work, each once; claimed from the right, put
-- back on the left); 17..19 the lanes' tenant queues (one hash per lane: "t|h" and "t|t" the head
-- and tail of tenant t's queue, "t|<seq>" its payloads at seq h+1..t, "#n" how many tenants have
-- work); 20..22 the lanes' parked tenants (sets: at their cap, out of the ring until a lease of
-- theirs ends); 23 in-flight leases per tenant (hash); 24 lane state (hash: smooth weighted
-- round-robin credit per lane, and "<lane>|turn", which of plain list and ring goes next).
-- Every key is declared and shares the queue's hash tag: Cluster-safe. No per-tenant keys.
local LANES = {'interactive', 'default', 'bulk'}
local PLAIN = {interactive = KEYS[12], default = READY, bulk = KEYS[13]}
local RING = {interactive = KEYS[14], default = KEYS[15], bulk = KEYS[16]}
local TQ = {interactive = KEYS[17], default = KEYS[18], bulk = KEYS[19]}
local PARKED = {interactive = KEYS[20], default = KEYS[21], bulk = KEYS[22]}
local IN_FLIGHT, LANE_STATE = KEYS[23], KEYS[24]

-- Lane and tenant of a payload, by the rule of domain/payload.py: absent or null is the default
-- lane / no tenant; a malformed value sends the payload to the default lane's plain list, whose
-- claimer dead-letters it with the reason payload.py gives. (Declared local in lib.lua.)
function route_of(raw)
  local found = member_tokens(raw)
  if not found then return 'default', nil end
  local lane, tenant = 'default', nil
  if found.priority and found.priority ~= 'null' then
    lane = string.match(found.priority, '^"([a-z]+)"$')
    if not PLAIN[lane or ''] then return 'default', nil end
  end
  if found.tenant and found.tenant ~= 'null' then
    tenant = string.match(found.tenant, '^"([%w_.:@%-]+)"$')
    if not tenant or #tenant > 64 then return 'default', nil end
  end
  return lane, tenant
end

local function tq_bounds(lane, t)
  local h = tonumber(redis.call('HGET', TQ[lane], t .. '|h') or '0')
  return h, tonumber(redis.call('HGET', TQ[lane], t .. '|t') or tostring(h))
end

-- Put `raw` into its lane: the lane's plain list when it has no tenant, else its tenant's queue
-- (a tenant that had no work joins the ring, unless parked). `front`: it is taken next.
function route(raw, front)
  local lane, t = route_of(raw)
  if not t then
    redis.call(front and 'RPUSH' or 'LPUSH', PLAIN[lane], raw)
    return
  end
  local h, tl = tq_bounds(lane, t)
  if tl <= h then
    h, tl = 0, 0
    redis.call('HINCRBY', TQ[lane], '#n', 1)
    if redis.call('SISMEMBER', PARKED[lane], t) == 0 then redis.call('LPUSH', RING[lane], t) end
  end
  if front then
    redis.call('HSET', TQ[lane], t .. '|' .. h, raw)
    h = h - 1
  else
    tl = tl + 1
    redis.call('HSET', TQ[lane], t .. '|' .. tl, raw)
  end
  redis.call('HSET', TQ[lane], t .. '|h', h, t .. '|t', tl)
end

-- The oldest payload of tenant t in `lane` (nil when none), and whether it has more.
local function tq_pop(lane, t)
  local h, tl = tq_bounds(lane, t)
  local raw = nil
  while not raw and h < tl do  -- a missing item (a hash partly lost) is skipped
    h = h + 1
    raw = redis.call('HGET', TQ[lane], t .. '|' .. h)
    if raw then redis.call('HDEL', TQ[lane], t .. '|' .. h) end
  end
  if h >= tl then
    redis.call('HDEL', TQ[lane], t .. '|h', t .. '|t')
    if redis.call('HINCRBY', TQ[lane], '#n', -1) <= 0 then redis.call('HDEL', TQ[lane], '#n') end
    return raw, false
  end
  redis.call('HSET', TQ[lane], t .. '|h', h)
  return raw, true
end

-- The ring lost tenants (Redis forgot it, or it was deleted) while they still have work: every
-- tenant with work is in the ring or parked, so when "#n" (tenants with work) is more than the
-- ring and the parked set hold, the missing ones go back to the ring's end. O(1) per claim while
-- the counts agree; a rebuild recounts "#n", so a wrong count costs one rebuild, not one per claim
-- (issue 44: a ring rebuilt only when empty starved every tenant but the one that joined it).
local function heal_ring(lane)
  local n = tonumber(redis.call('HGET', TQ[lane], '#n') or '0')
  if n <= redis.call('LLEN', RING[lane]) + redis.call('SCARD', PARKED[lane]) then return end
  local listed = {}
  for _, t in ipairs(redis.call('LRANGE', RING[lane], 0, -1)) do listed[t] = true end
  local count = 0
  for _, f in ipairs(redis.call('HKEYS', TQ[lane])) do
    local t = string.match(f, '^(.+)|t$')
    if t then
      local h, tl = tq_bounds(lane, t)
      if tl > h then
        count = count + 1
        if not listed[t] and redis.call('SISMEMBER', PARKED[lane], t) == 0 then
          redis.call('LPUSH', RING[lane], t)
          listed[t] = true
        end
      end
    end
  end
  redis.call('HSET', TQ[lane], '#n', count)
end

-- A lease of tenant t was taken (+1) or ended (-1). An end unparks t in every lane: it was parked
-- at its cap and now holds one slot less (a lowered cap parks it again at its next turn).
function count_in_flight(t, delta)
  if not t then return end
  if redis.call('HINCRBY', IN_FLIGHT, t, delta) <= 0 then redis.call('HDEL', IN_FLIGHT, t) end
  if delta < 0 then
    for _, lane in ipairs(LANES) do
      if redis.call('SREM', PARKED[lane], t) == 1 then redis.call('LPUSH', RING[lane], t) end
    end
  end
end

-- The lane policy of a claim: "8,3,1;0;acme=4,beta=2;interactive,default" (domain/lanes.py
-- LanePolicy.script_arg): weights, tenant cap, per-tenant caps, and the lanes this claim serves
-- (empty or absent: every lane; the batch lane's batcher claims "bulk" alone, issue 28).
local function parse_policy(arg)
  local w, cap, overrides, served, kind = string.match(arg, '^([%d,]*);(%d*);([^;]*);?([%a,]*);?(%a*)$')
  -- "batch": the batch lane's claim (issue 44): tenant caps bound realtime work in flight, so its
  -- members neither wait for a cap nor count against one (the batch lane has its own bound).
  local policy = {weights = {}, cap = tonumber(cap) or 0, caps = {}, serves = {}, batch = kind == 'batch'}
  for _, lane in ipairs(LANES) do policy.serves[lane] = (served or '') == '' end
  for lane in string.gmatch(served or '', '%a+') do
    if PLAIN[lane] then policy.serves[lane] = true end
  end
  local i = 1
  for n in string.gmatch(w or '', '%d+') do
    if LANES[i] then policy.weights[LANES[i]] = tonumber(n) end
    i = i + 1
  end
  for _, lane in ipairs(LANES) do policy.weights[lane] = policy.weights[lane] or 1 end
  for t, c in string.gmatch(overrides or '', '([^,=]+)=(%d+)') do policy.caps[t] = tonumber(c) end
  return policy
end

local function at_cap(policy, t)
  if policy.batch then return false end
  local cap = policy.caps[t] or policy.cap
  return cap > 0 and tonumber(redis.call('HGET', IN_FLIGHT, t) or '0') >= cap
end

local function has_work(lane)
  heal_ring(lane)
  return redis.call('LLEN', PLAIN[lane]) > 0 or redis.call('LLEN', RING[lane]) > 0
end

-- Smooth weighted round robin over the lanes served that have work: each gains its weight, the richest is
-- served and pays the total. A lane without work keeps no credit. O(lanes) per pick.
local function pick_lane(policy)
  local best, total = nil, 0
  for _, lane in ipairs(LANES) do
    if not policy.serves[lane] then  -- another claimer's lane: its credit is left as it is
    elseif has_work(lane) then
      local credit = redis.call('HINCRBY', LANE_STATE, lane, policy.weights[lane])
      total = total + policy.weights[lane]
      if not best or credit > best[2] then best = {lane, credit} end
    else
      redis.call('HDEL', LANE_STATE, lane)
    end
  end
  if not best then return nil end
  redis.call('HINCRBY', LANE_STATE, best[1], -total)
  return best[1]
end

-- The next tenant payload of `lane` in ring order, skipping (and parking) tenants at their cap.
local function from_ring(lane, policy, tries)
  while tries > 0 do
    local t = redis.call('RPOP', RING[lane])
    if not t then return nil end
    tries = tries - 1
    if at_cap(policy, t) then
      redis.call('SADD', PARKED[lane], t)
    else
      local raw, more = tq_pop(lane, t)
      if more then redis.call('LPUSH', RING[lane], t) end
      if raw then return raw end
    end
  end
  return nil
end

-- The next payload of `lane`: its plain list (no tenant) and its tenant ring take turns. A payload
-- pushed straight onto READY that names another lane or a tenant is routed on sight.
local function from_lane(lane, policy, tries)
  local turn = redis.call('HGET', LANE_STATE, lane .. '|turn')
  local ring_first = turn == 'ring' and redis.call('LLEN', RING[lane]) > 0
  redis.call('HSET', LANE_STATE, lane .. '|turn', ring_first and 'plain' or 'ring')
  local raw = ring_first and from_ring(lane, policy, tries) or nil
  while not raw and tries > 0 do
    raw = redis.call('RPOP', PLAIN[lane])
    if not raw then break end
    tries = tries - 1
    local to_lane, t = route_of(raw)
    if to_lane ~= lane or t then
      route(raw, false)
      raw = nil
    end
  end
  return raw or (not ring_first and from_ring(lane, policy, tries)) or nil
end

-- The next payload by lane weight and tenant turn, or nil when nothing claimable is left.
-- `tries` bounds the pops of one claim (parked tenants, routed payloads): O(1) per claim.
local function next_payload(policy, tries)
  for _ = 1, #LANES do
    local lane = pick_lane(policy)
    if not lane then return nil end
    local raw = from_lane(lane, policy, tries)
    if raw then return raw end
  end
  return nil
end

-- Payloads waiting in every lane: the plain lists and the tenant queues (fields less counters).
local function ready_count()
  local n = 0
  for _, lane in ipairs(LANES) do
    local tenants = tonumber(redis.call('HGET', TQ[lane], '#n') or '0')
    local fields = redis.call('HLEN', TQ[lane])
    n = n + redis.call('LLEN', PLAIN[lane]) + math.max(0, fields - 2 * tenants - (fields > 0 and 1 or 0))
  end
  return n
end
