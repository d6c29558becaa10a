-- Merges members into a channel's group mentions and keeps the newest
-- cap+1 seqs. KEYS[1] = the set, KEYS[2] = the channel value (its top is
-- the fifth part; redisstore.LuaChannelValue's cvget and cvset);
-- ARGV[1] = cap+1, ARGV[2] = "h" to hydrate (the top then becomes known)
-- or "w" (a write raises the top only where it is known: an unknown top
-- still needs Postgres' older ones), then the members. Of one seq's
-- members the least (bytes) is kept, as channel.MergeGroupMentions keeps
-- the least sender. Returns the set's size.
local function less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
for i = 3, #ARGV do
  local m = ARGV[i]
  local p = string.sub(m, 1, 11)
  local same = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. p, '[' .. p .. '\255')
  local least = m
  for _, o in ipairs(same) do if less(o, least) then least = o end end
  for _, o in ipairs(same) do if o ~= least then redis.call('ZREM', KEYS[1], o) end end
  if least == m then redis.call('ZADD', KEYS[1], 0, m) end
end
local n = redis.call('ZCARD', KEYS[1])
local over = n - tonumber(ARGV[1])
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1) n = n - over end
local top = '00000000000'
if n > 0 then top = string.sub(redis.call('ZRANGE', KEYS[1], -1, -1)[1], 1, 11) end
local f = cvget(KEYS[2])
local cur = f[5] ~= '-' and f[5]
if cur or ARGV[2] == 'h' then
  if cur and less(top, cur) then top = cur end
  f[5] = top
  cvset(KEYS[2], f)
end
return n
