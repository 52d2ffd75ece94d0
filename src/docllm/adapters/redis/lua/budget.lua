-- budget.lua: the fleet's LLM spend of one day against its cap (I14; domain/budget.py), in the
-- queue's hash tag. lib.lua is prepended (its queue locals are unused here).
-- KEYS: 1 the day's spend in micro-dollars (RedisKeys.spend(day): the day is the authority
--         clock's, so the count rolls over with the key), 2 the fleet's cap (RedisKeys.spend_cap)
-- ARGV[1] op       add | view
-- ARGV[2] micro    add: micro-dollars an attempt spent
-- ARGV[3] keep_ms  add: how long the day's count lives after its last add
-- Returns {spent, fleet cap} in micro-dollars; the cap -1 when the fleet has none (settings rule).
local spent
if ARGV[1] == 'add' then
  spent = redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
else
  spent = tonumber(redis.call('GET', KEYS[1]) or '0')
end
local cap = redis.call('GET', KEYS[2])
return {spent, cap and tonumber(cap) or -1}
