-- Adds deleted seqs, trims the set to the window and, when the set's
-- count is kept (hydrated) or ARGV[2] says this is a hydrate's last part
-- ("1", "v1"), sets it. KEYS[1] = the count: a thread's count key, or
-- the channel value (its fourth part; redisstore.LuaChannelValue's cvget
-- and cvset) when ARGV[2] starts with "v"; KEYS[2] = the set; ARGV[1] =
-- the window, ARGV[3..] = seqs. Returns the set's size.
local args = {}
for i = 3, #ARGV do args[#args+1] = ARGV[i] args[#args+1] = ARGV[i] end
for i = 1, #args, 1000 do redis.call('ZADD', KEYS[2], unpack(args, i, math.min(i + 999, #args))) end
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if top[2] then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', tonumber(top[2]) - tonumber(ARGV[1])))
end
local n = redis.call('ZCARD', KEYS[2])
if ARGV[2] == 'v0' or ARGV[2] == 'v1' then
  local f = cvget(KEYS[1])
  if ARGV[2] == 'v1' or f[4] ~= '-' then
    f[4] = tostring(n)
    cvset(KEYS[1], f)
  end
elseif ARGV[2] == '1' or redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[1], n)
end
return n
