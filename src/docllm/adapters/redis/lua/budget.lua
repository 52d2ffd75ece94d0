-- budget.lua: the fleet's LLM spend of one day against its cap (I14; domain/budget.py), and each
-- deployment's share of it, in the queue's hash tag. lib.lua is prepended (its queue locals are
-- unused here).
-- KEYS: 1 the day's spend in micro-dollars (RedisKeys.spend(day): the day is the authority
--         clock's, so the count rolls over with the key), 2 the fleet's cap (RedisKeys.spend_cap),
--       3 the day's spend per deployment, name -> micro-dollars (RedisKeys.spend_by_deployment(day))
-- ARGV[1] op       add | view
-- ARGV[2] micro    add: micro-dollars an attempt spent
-- ARGV[3] keep_ms  add: how long the day's counts live after their last add
-- ARGV[4..] add: pairs of deployment name, micro-dollars of ARGV[2] spent there
-- Returns {spent, fleet cap, {name, micro, ...}} in micro-dollars; the cap -1 when the fleet has
-- none (settings rule).
local spent
if ARGV[1] == 'add' then
  local keep = tonumber(ARGV[3])
  spent = redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
  redis.call('PEXPIRE', KEYS[1], keep)
  for i = 4, #ARGV - 1, 2 do
    redis.call('HINCRBY', KEYS[3], ARGV[i], tonumber(ARGV[i + 1]))
  end
  if #ARGV >= 5 then
    redis.call('PEXPIRE', KEYS[3], keep)
  end
else
  spent = tonumber(redis.call('GET', KEYS[1]) or '0')
end
local cap = redis.call('GET', KEYS[2])
return {spent, cap and tonumber(cap) or -1, redis.call('HGETALL', KEYS[3])}
