-- extend.lua: renew a lease (heartbeat), only while the token still holds it.
-- KEYS: 1 ready (unused), 2 processing (unused), 3 lease_index, 4 leases, 5 delayed (unused),
--       6 dead (unused), 7 processing_ts (unused)
-- ARGV[1] token
-- ARGV[2] now_ms     authority time
-- ARGV[3] lease_ms   the new deadline is now_ms + lease_ms
-- Returns 1 when renewed, 0 when the token holds no lease.
if not lease_of(ARGV[1]) then return 0 end
redis.call('ZADD', LEASE_INDEX, tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
return 1
