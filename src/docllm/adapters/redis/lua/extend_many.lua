-- extend_many.lua: renew leases (one process's heartbeat), only while each token still holds an
-- unexpired lease: a lease past its deadline may already be in a reaper's hands, so it stays lost,
-- unless it expired only because the authority's clock stepped forward (lib.lua, renewable).
-- KEYS: see lib.lua (3 lease_index, 4 leases, 10 clock)
-- ARGV[1] now_ms     authority time
-- ARGV[2] lease_ms   the new deadline is now_ms + lease_ms
-- ARGV[3..] tokens
-- Returns one 1 (renewed) or 0 (lost) per token, in order.
local now, lease_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local deadline = tonumber(redis.call('ZSCORE', LEASE_INDEX, ARGV[i]))
  if deadline and renewable(deadline, now) and lease_of(ARGV[i]) then
    redis.call('ZADD', LEASE_INDEX, now + lease_ms, ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
