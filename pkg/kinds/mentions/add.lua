-- Adds seqs to a user's mentions in one channel and keeps the newest
-- cap+1. KEYS[1] = the user's mention hash, KEYS[2] (optional) = the
-- user's tombstone (the same {user} slot); ARGV = cap+1, the channel,
-- then padded seqs (redisstore.PadSeq). A stored member of another width
-- (garbled) is dropped. Sorted by bytes (Lua's '<' on strings follows the
-- server's LC_COLLATE). Returns how many are kept, or with KEYS[2] the
-- user's erasure generation (decimal, "-1": unknown), read in the script
-- that writes, so the event stamped with it is ordered against an
-- erasure as its Redis write is.
local function less(a, b)
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local seen, list = {}, {}
local function add(m)
  if #m == 11 and not seen[m] then seen[m] = true list[#list+1] = m end
end
local cur = redis.call('HGET', KEYS[1], ARGV[2])
if cur then for m in string.gmatch(cur, "%S+") do add(m) end end
for i = 3, #ARGV do add(ARGV[i]) end
table.sort(list, less)
local from = math.max(1, #list - tonumber(ARGV[1]) + 1)
redis.call('HSET', KEYS[1], ARGV[2], table.concat(list, " ", from, #list))
if KEYS[2] then return redis.call('HGET', KEYS[2], 'g') or "-1" end
return #list - from + 1
