-- expired.lua: up to `limit` leases whose deadline has passed, in deadline order, from a point
-- in the backlog of expired leases. Reads only the expired members of the index:
-- O(log n + limit), whatever is in flight or expired.
-- KEYS: 1 ready (unused), 2 processing (unused), 3 lease_index, 4 leases, 5 delayed (unused),
--       6 dead (unused), 7 processing_ts (unused), 10 clock
-- Nothing is returned for a lease after a forward step of the clock (lib.lua, clock_quiet).
-- ARGV[1] now_ms   authority time; a lease has expired when its deadline < now_ms
-- ARGV[2] limit    at most this many
-- ARGV[3] start    0 <= start < 1: where to begin when more than `limit` have expired, as a share
--                  of the rest (0: the oldest). Reapers that each pass a random start take
--                  mostly disjoint batches instead of all fighting over the same oldest ones.
-- Returns a flat list: token, deadline_ms, lease JSON, token, ...
-- An index entry without lease data is removed and not returned (see lib.lua, lease_of).
local limit = tonumber(ARGV[2])
if clock_quiet(tonumber(ARGV[1])) then return {} end  -- after a step of the clock
local backlog = redis.call('ZCOUNT', LEASE_INDEX, '-inf', '(' .. ARGV[1])
if backlog == 0 or limit < 1 then return {} end  -- (a ZRANGE to -1 would read them all)
local first = math.floor((tonumber(ARGV[3]) or 0) * math.max(0, backlog - limit))
-- By rank (O(log n + limit)): the expired members are the lowest ranks of the index.
local found = redis.call('ZRANGE', LEASE_INDEX, first, math.min(first + limit, backlog) - 1, 'WITHSCORES')
local out = {}
for i = 1, #found, 2 do
  local data = redis.call('HGET', LEASES, found[i])
  if data then
    out[#out + 1] = found[i]
    out[#out + 1] = found[i + 1]
    out[#out + 1] = data
  else
    redis.call('ZREM', LEASE_INDEX, found[i])
  end
end
return out
