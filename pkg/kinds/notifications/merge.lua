-- Merges registers into a user's hash (notification.Merge) by
-- mergefields (redisstore.LuaMergeFields). KEYS[1] = the user's hash;
-- ARGV = mark ("1": set ":loaded" after), the TTL (ms) of a hash that
-- holds ":loaded" alone, then channel, register pairs. Returns, per pair,
-- {changed, register}.
return mergefields(KEYS[1], function(a, b) return ncmp(nreg(a), nreg(b)) end)
