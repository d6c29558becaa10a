-- Merges markers into a user's hash (fullyread.Merge) by mergefields
-- (redisstore.LuaMergeFields). KEYS[1] = the user's hash, KEYS[2]
-- (optional) = the user's tombstone; ARGV = mark ("1": set ":loaded"
-- after), the TTL (ms) of a hash that holds ":loaded" alone, then field,
-- marker pairs. A marker is "SEQ UPDATED_MS MSG" (decimal; cmp,
-- redisstore.LuaCommon's, orders decimal numerals, and message ids by
-- length, then bytes, as Order does). Returns, per pair, {changed,
-- marker}, then with KEYS[2] the user's erasure generation (decimal, "-1":
-- none), read in the script that writes, so the record stamped with it is
-- ordered against an erasure as its Redis write is, and whether the hash
-- is complete (1: hydrated).
local function parts(v)
  local a = string.find(v, " ", 1, true)
  local b = string.find(v, " ", a + 1, true)
  return {string.sub(v, 1, a - 1), string.sub(v, a + 1, b - 1), string.sub(v, b + 1)}
end
local function order(x, y)
  for i = 1, 3 do
    local c = cmp(x[i], y[i])
    if c ~= 0 then return c end
  end
  return 0
end
local out = mergefields(KEYS[1], function(a, b) return order(parts(a), parts(b)) end)
if KEYS[2] then
  out[#out+1] = redis.call('HGET', KEYS[2], 'g') or "-1"
  out[#out+1] = redis.call('HEXISTS', KEYS[1], ':loaded')
end
return out
