-- batch_lease.lua: the lease on polling one provider batch (issue 28), token-fenced like a task's
-- lease and decided on the authority clock. lib.lua is prepended (its queue locals are unused here).
-- KEYS: 1 the batch's lease hash (RedisKeys.batch_lease, in the queue's hash tag), 2 the clock's
--       quiet windows (RedisKeys.clock): after a step of the authority clock, as a task's lease
--       (lib.lua, clock_quiet and renewable), nobody takes a lease that only the step made look
--       run out, and its holder may still renew it
-- ARGV[1] op       acquire | renew | release
-- ARGV[2] token    acquire: the new token; renew, release: the holder's
-- ARGV[3] now_ms   authority time
-- ARGV[4] ttl_ms   acquire, renew: the lease lasts until now_ms + ttl_ms
-- ARGV[5] owner    acquire: who polls (shown to operators)
-- ARGV[6] judge    acquire: '1' when the caller's clock may find a lease run out
-- The hash: token, owner, until (authority ms). Its PX only cleans up after a holder that is gone;
-- "until" decides, so a lease runs out on the authority clock whatever the key's own TTL.
-- Returns 1 when done (acquired, renewed, released), 0 when the lease is another's or has run
-- out (renew: even when nobody took it since; a stale poller never comes back silently).
local L = KEYS[1]
CLOCK = KEYS[2]
local op, token, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local held = redis.call('HMGET', L, 'token', 'until')
local holder, until_ms = held[1], tonumber(held[2])
local live = holder and until_ms and until_ms >= now

if op == 'acquire' then
  -- Taking a lease someone held is a verdict that it ran out: not from a clock that has just
  -- started (ARGV[6] ~= '1': RedisServerClock.verdict_ms), nor in a quiet window.
  if live or (holder and until_ms and (ARGV[6] ~= '1' or clock_quiet(now))) then return 0 end
  local ttl = tonumber(ARGV[4])
  redis.call('DEL', L)
  redis.call('HSET', L, 'token', token, 'owner', ARGV[5], 'until', string.format('%d', now + ttl))
  redis.call('PEXPIRE', L, ttl)
  return 1
elseif op == 'renew' then
  if holder ~= token or not until_ms or not renewable(until_ms, now) then return 0 end
  local ttl = tonumber(ARGV[4])
  redis.call('HSET', L, 'until', string.format('%d', now + ttl))
  redis.call('PEXPIRE', L, ttl)
  return 1
elseif op == 'release' then
  if holder ~= token then return 0 end
  redis.call('DEL', L)
  return 1
end
return redis.error_reply('batch_lease.lua: unknown op ' .. tostring(op))
