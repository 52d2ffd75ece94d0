-- clock_step.lua: a process saw the authority's clock step forward (redis_clock.py); record it for
-- the fleet (lib.lua, clock_quiet and renewable). Several processes report the same step: the
-- quiet period lasts until the latest report's end, and `step_from` keeps the earliest time
-- before the step reported within one quiet period.
-- KEYS: see lib.lua (10 clock)
-- ARGV[1] quiet_until  no reclaims before this (authority ms: the step's new time + a lease)
-- ARGV[2] step_from    the authority time just before the step
-- ARGV[3] now_ms       the new authority time
-- Returns 1 when the quiet period was extended, else 0.
local until_ms, from, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local quiet = tonumber(redis.call('HGET', CLOCK, 'quiet_until')) or 0
if until_ms <= quiet then return 0 end
if quiet > now then  -- within the period of an earlier report of this step
  from = math.min(from, tonumber(redis.call('HGET', CLOCK, 'step_from')) or from)
end
redis.call('HSET', CLOCK, 'quiet_until', until_ms, 'step_from', from)
redis.call('HINCRBY', CLOCK, 'steps', 1)
return 1
