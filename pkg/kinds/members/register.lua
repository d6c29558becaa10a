-- The membership register's functions, shared by the kind's scripts
-- (after redisstore.LuaCommon, which has cmp and b62).
local function reg(v)
  local t = {}
  for p in string.gmatch(v, "[^ ]+") do t[#t+1] = p end
  return t
end
-- channel.Membership.Compare: version seq, version ms, join after leave,
-- join point.
local function cmpreg(a, b)
  local c = cmp(a[2], b[2]) if c ~= 0 then return c end
  c = cmp(a[3], b[3]) if c ~= 0 then return c end
  if a[1] ~= b[1] then if a[1] == "1" then return 1 else return -1 end end
  return cmp(a[4], b[4])
end
local function mergereg(key, field, inc)
  local cur = redis.call('HGET', key, field)
  if cur and cmpreg(reg(inc), reg(cur)) <= 0 then return {0, cur, cur} end
  redis.call('HSET', key, field, inc)
  return {1, inc, cur or ""}
end
-- countflag moves the count in field counter of key for a register
-- changed from was to now ("" or false: none), by whether each starts with
-- flag.
local function countflag(key, counter, was, now, flag)
  local a, b = was and string.sub(was, 1, 1) == flag, string.sub(now, 1, 1) == flag
  if a ~= b then
    local d = -1
    if b then d = 1 end
    redis.call('HINCRBY', key, counter, d)
  end
end
-- A user's membership hash counts its left registers in ':l' when it
-- has had the count since it was made (an older build's hash has none:
-- readers then decode every register). leftcount starts the count of a
-- hash about to be made and tells whether the hash keeps one.
local function leftcount(key)
  if redis.call('HEXISTS', key, ':l') == 1 then return true end
  if redis.call('EXISTS', key) == 1 then return false end
  redis.call('HSET', key, ':l', '0')
  return true
end
local function mergeum(key, field, inc)
  local counted = leftcount(key)
  local r = mergereg(key, field, inc)
  if counted and r[1] == 1 then countflag(key, ':l', r[3], r[2], "0") end
  return r
end
local function mergecm(key, field, inc)
  local r = mergereg(key, field, inc)
  if r[1] == 1 then countflag(key, ':n', r[3], r[2], "1") end
  return r
end
