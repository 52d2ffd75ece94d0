-- clamp.lua: no lease can legitimately end more than lease_ms after now, and no retry be due more
-- than max_delay_ms after now; a deadline further out means the authority's clock stepped back
-- (an NTP step, a failover to a host whose clock is behind: ARCHITECTURE.md, Clocks). Bring such times
-- to the furthest legitimate one, so a crashed worker's task is reclaimed within a lease of the
-- step, not an hour later. Reads only the entries past the horizon: O(log n + clamped), normally 0.
-- KEYS: see lib.lua (3 lease_index, 5 delayed)
-- ARGV[1] now_ms        authority time
-- ARGV[2] lease_ms      the longest a lease runs from its last renewal
-- ARGV[3] max_delay_ms  the longest retry delay
-- ARGV[4] limit         at most this many of each are moved per call
-- ARGV[5] slack_ms      processes read the authority at slightly different moments
-- Returns how many deadlines and due times were moved.
local now, slack, limit = tonumber(ARGV[1]), tonumber(ARGV[5]), tonumber(ARGV[4])
local moved = 0
for _, pair in ipairs({{LEASE_INDEX, now + tonumber(ARGV[2])}, {DELAYED, now + tonumber(ARGV[3])}}) do
  local key, horizon = pair[1], pair[2]
  local far = redis.call('ZRANGEBYSCORE', key, '(' .. (horizon + slack), '+inf', 'LIMIT', 0, limit)
  for _, member in ipairs(far) do
    redis.call('ZADD', key, horizon, member)
    moved = moved + 1
  end
end
return moved
