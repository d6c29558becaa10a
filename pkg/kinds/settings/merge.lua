-- Merges a settings register into the user's hash (privacy.Merge), field
-- "s". KEYS[1] = the hash, KEYS[2] (optional) = the user's tombstone;
-- ARGV[1] = "R D V[ L]", ARGV[2] = the TTL (ms) of a defaults entry,
-- ARGV[3] (optional) = "1": a change, whose version V the script sets to
-- Redis' clock (TIME, in ms), or one more than the stored version when
-- that is not less, so that the change always wins over what it read and
-- no gateway's clock orders it. Returns {changed, stored value}, then with
-- KEYS[2] the user's erasure generation (decimal, "-1": unknown), read in
-- the script that writes, so the event stamped with it is ordered against
-- an erasure as its Redis write is. cmp is redisstore.LuaCmp.
local cur = redis.call('HGET', KEYS[1], 's')
local inc = ARGV[1]
local b = {} for p in string.gmatch(inc, "[^ ]+") do b[#b+1] = p end
local a = {}
if cur then for p in string.gmatch(cur, "[^ ]+") do a[#a+1] = p end end
if ARGV[3] == "1" then
  local t = redis.call('TIME')
  local v = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if cur then
    local sv = tonumber(a[3])
    if sv and sv >= v then v = sv + 1 end
  end
  b[3] = string.format("%d", v)
  inc = table.concat(b, " ")
elseif cur then
  local c = cmp(b[3], a[3])
  -- a tie: the one sharing less ("0" before "1") wins, then the quieter
  -- default level (an absent level is 0)
  if c == 0 then if b[1] ~= a[1] then if b[1] == "0" then c = 1 else c = -1 end end end
  if c == 0 then if b[2] ~= a[2] then if b[2] == "0" then c = 1 else c = -1 end end end
  if c == 0 then c = cmp(b[4] or "0", a[4] or "0") end
  if c <= 0 then
    if KEYS[2] then return {0, cur, redis.call('HGET', KEYS[2], 'g') or "-1"} end
    return {0, cur}
  end
end
redis.call('HSET', KEYS[1], 's', inc)
if b[3] == "0" then
  -- the defaults, cached after a Postgres read: expire, so only active
  -- users keep a key; a real setting (version > 0) never expires
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PERSIST', KEYS[1])
end
if KEYS[2] then return {1, inc, redis.call('HGET', KEYS[2], 'g') or "-1"} end
return {1, inc}
