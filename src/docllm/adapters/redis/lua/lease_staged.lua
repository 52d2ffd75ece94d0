-- lease_staged.lua: lease a payload that this caller's blocking wait moved to staging.
-- KEYS: see lib.lua (2 processing, 3 lease_index, 4 leases, 7 processing_ts, 8 staging, 9 staging_seen)
-- ARGV[1] raw       the staged payload
-- ARGV[2] now_ms    authority time
-- ARGV[3] lease_ms
-- ARGV[4] token     the new lease's token
-- ARGV[5] holder
-- ARGV[6] serves    the lanes this caller claims from, "interactive,default" (empty: every lane);
--                   a payload of another lane (one pushed straight onto ready) goes to its own lane
-- Returns 1 when leased (2 when its task carries an operator's cancel mark), 0 when the payload was
-- no longer staged (unstage gave it back to ready) or went to its lane or tenant queue instead: a
-- tenant's payload is claimed only by claim.lua, which holds its cap.
if redis.call('LREM', STAGING, 1, ARGV[1]) == 0 then return 0 end
redis.call('HDEL', STAGING_SEEN, ARGV[1])
if (ARGV[6] or '') ~= '' and not string.find(',' .. ARGV[6] .. ',', ',' .. route_of(ARGV[1]) .. ',', 1, true) then
  route(ARGV[1], true)  -- the batch lane's (issue 28): its own claimer takes it next
  return 0
end
local _, tenant = route_of(ARGV[1])
if tenant then  -- a tenant's payload pushed straight onto ready: to its queue, under its cap (issue 44)
  route(ARGV[1], true)
  return 0
end
lease(ARGV[1], ARGV[4], ARGV[5], tonumber(ARGV[2]), tonumber(ARGV[3]))
return cancelled(ARGV[1]) and 2 or 1
