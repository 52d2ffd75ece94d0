-- push.lua: a producer's payload into its lane: the lane's plain list, or its tenant's queue
-- (lanes.lua). The original producers' plain LPUSH onto ready is the default lane's push.
-- KEYS: see lib.lua and lanes.lua (1 ready, 12..24 lanes)
-- ARGV[1] raw     the payload
-- ARGV[2] front   '1': claimed next in its queue; '0': behind everything there
route(ARGV[1], ARGV[2] == '1')
return 1
