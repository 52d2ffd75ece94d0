-- clock_step.lua: a process saw the authority's clock step (redis_clock.py); record it for the
-- fleet (lib.lua, clock_quiet and renewable): a quiet window on the new clock and one on the old
-- clock, each from the reporter's previous reading (the step came after it) to a lease and a
-- third after that reading: long enough for every worker that holds a lease to re-read the clock
-- (every third of a lease) and renew; a reporter that read the clock long before the step adds
-- little. Several processes report the same step; the 32 latest windows are kept.
-- KEYS: see lib.lua (10 clock)
-- ARGV[1] new_ms    the authority time after the step
-- ARGV[2] old_ms    the time the reporter expected, on the clock before the step
-- ARGV[3] since_ms  how long ago the reporter read the clock before
-- ARGV[4] lease_ms
-- Returns 1.
local new, old = tonumber(ARGV[1]), tonumber(ARGV[2])
local since, lease_ms = tonumber(ARGV[3]), tonumber(ARGV[4])
local floor = math.min(new, old) - since  -- a lease live at the step, on either clock
local span = lease_ms + math.floor(lease_ms / 3)
for _, at in ipairs({new, old}) do
  redis.call('LPUSH', CLOCK, string.format('%d:%d:%d', at - since, at - since + span, floor))
end
redis.call('LTRIM', CLOCK, 0, 31)  -- the 32 latest windows
return 1
