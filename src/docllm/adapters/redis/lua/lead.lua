-- lead.lua: take or renew the fleet's lease on a role, so that one process does a fleet-wide
-- chore per cycle (the reconciler) instead of every worker process doing it.
-- KEYS: 1 the role's key (RedisKeys.lead); the seven queue keys are not used
-- ARGV[1] holder   who asks (no spaces)
-- ARGV[2] now_ms   authority time
-- ARGV[3] ttl_ms   how long the lease lasts
-- The key holds "holder until_ms"; its PX only cleans up after a holder that is gone.
-- Returns 1 when ARGV[1] holds it now (taken or renewed), 0 while another holder does.
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local current = redis.call('GET', KEYS[1])
if current then
  local holder, until_ms = string.match(current, '^(%S+) (%d+)$')
  if holder and holder ~= ARGV[1] and tonumber(until_ms) >= now then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', now + ttl), 'PX', ttl)
return 1
