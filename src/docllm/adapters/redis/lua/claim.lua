-- claim.lua: promote due retries, then lease up to one ready payload per token given, picked by
-- lane weight and, inside a lane, tenant turn under tenant caps (lanes.lua). Never blocks.
-- KEYS: see lib.lua and lanes.lua (1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed,
--       7 processing_ts, 11 cancelled, 12..24 lanes)
-- ARGV[1] now_ms         authority time
-- ARGV[2] lease_ms       each lease's deadline is now_ms + lease_ms
-- ARGV[3] holder         who takes them, for display
-- ARGV[4] promote_batch  at most this many due delayed payloads move into ready first
-- ARGV[5] policy         "8,3,1;0;acme=4": lane weights, tenant cap, per-tenant caps, lanes served,
--                        "batch" for the batch lane's claim (LanePolicy.script_arg)
-- ARGV[6..] tokens       one new lease token per payload wanted, in order
-- Returns the raw payloads in claim order (fewer than tokens when nothing claimable is left),
-- each followed by 1 when its task carries an operator's cancel mark, else 0.
local now, lease_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
promote(now, tonumber(ARGV[4]))
local policy = parse_policy(ARGV[5])
local out = {}
for i = 6, #ARGV do
  local raw = next_payload(policy, 64)  -- at most 64 pops per claim (parked tenants, routed payloads)
  if not raw then break end
  lease(raw, ARGV[i], ARGV[3], now, lease_ms, policy.batch)
  out[#out + 1] = raw
  out[#out + 1] = cancelled(raw) and 1 or 0
end
return out
