package redisstore

import "github.com/redis/go-redis/v9"

// luaCommon merges one encoded state (see codec.go) into a user's hash. The
// caller encodes the incoming value canonically (encodeValue), so a stored
// value equal to it is a duplicate and an empty field just takes it; only
// otherwise are both parsed and merged with the max rule. A stored value in
// the v1 layout is converted on the way (its decimal numbers to base 62,
// exactly: two limbs below 2^53) and rewritten only if the merge advances.
//
// Numbers are base-62 numerals compared as strings: the longer is greater,
// then byte by byte with string.byte — not with Lua's '<' on strings, which
// follows the server's LC_COLLATE (Redis calls setlocale) and could order
// 'a' before 'B'.
const luaCommon = `
local D = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
local function cmp(a, b)
  if a == b then return 0 end
  if #a ~= #b then if #a < #b then return -1 else return 1 end end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then if x < y then return -1 else return 1 end end
  end
  return 0
end
local function cmppos(ae, as, be, bs)
  local c = cmp(ae, be)
  if c ~= 0 then return c end
  return cmp(as, bs)
end
local function b62(d)
  local n = #d
  local hi, lo = 0, tonumber(d)
  if n > 9 then hi, lo = tonumber(string.sub(d, 1, n - 9)), tonumber(string.sub(d, n - 8)) end
  local out = ""
  repeat
    local r = hi % 62
    hi = (hi - r) / 62
    local t = r * 1000000000 + lo
    r = t % 62
    lo = (t - r) / 62
    out = string.sub(D, r + 1, r + 1) .. out
  until hi == 0 and lo == 0
  return out
end
local function pos(p)
  local k = string.find(p, ".", 1, true)
  if k then return string.sub(p, 1, k - 1), string.sub(p, k + 1) end
  return "0", p
end
local function parse(v)
  local t = {}
  if string.sub(v, 1, 3) == "v1:" then
    for part in string.gmatch(v, "([^:]*):?") do t[#t+1] = part end
    if not t[9] then return nil end
    for _, k in ipairs({2, 3, 5, 6, 9}) do if not string.find(t[k], "^%d+$") then return nil end end
    return {re=b62(t[2]), rs=b62(t[3]), rm=t[4], de=b62(t[5]), ds=b62(t[6]), dm=t[7], dev=t[8], ts=b62(t[9])}
  end
  local i = 1
  while true do
    local j = string.find(v, " ", i, true)
    if not j then t[#t+1] = string.sub(v, i) break end
    t[#t+1] = string.sub(v, i, j - 1)
    i = j + 1
  end
  if #t ~= 4 and #t ~= 6 then return nil end
  local s = {rm=t[2], dev=t[3], ts=t[4]}
  s.re, s.rs = pos(t[1])
  if t[5] then s.de, s.ds = pos(t[5]) s.dm = t[6] else s.de, s.ds, s.dm = s.re, s.rs, s.rm end
  return s
end
local function enc(s)
  local v = s.rs
  if s.re ~= "0" then v = s.re .. "." .. v end
  v = v .. " " .. s.rm .. " " .. s.dev .. " " .. s.ts
  if s.de ~= s.re or s.ds ~= s.rs or s.dm ~= s.rm then
    local d = s.ds
    if s.de ~= "0" then d = s.de .. "." .. d end
    v = v .. " " .. d .. " " .. s.dm
  end
  return v
end
local function merge(key, field, inc)
  local cur = redis.call('HGET', key, field)
  if inc == "" then return {0, cur or ""} end
  if cur == inc then return {0, cur} end
  local s = cur and parse(cur)
  if not s then
    redis.call('HSET', key, field, inc)
    return {1, inc}
  end
  local n = parse(inc)
  local readUp = cmppos(n.re, n.rs, s.re, s.rs) > 0
  local delUp = cmppos(n.de, n.ds, s.de, s.ds) > 0
  if not (readUp or delUp) then return {0, cur} end
  if readUp then s.re, s.rs, s.rm = n.re, n.rs, n.rm end
  if delUp then s.de, s.ds, s.dm = n.de, n.ds, n.dm end
  -- reading implies delivery
  if cmppos(s.re, s.rs, s.de, s.ds) > 0 then s.de, s.ds, s.dm = s.re, s.rs, s.rm end
  s.dev = n.dev
  if cmp(n.ts, s.ts) > 0 then s.ts = n.ts end
  local v = enc(s)
  redis.call('HSET', key, field, v)
  return {1, v}
end
`

// mergeScript merges one channel's state into a user's hash.
// KEYS[1] = user hash; ARGV = channel, encoded value (encodeValue).
// Returns {changed (0/1), merged value in either layout ("" = no state)}.
var mergeScript = redis.NewScript(luaCommon + `
return merge(KEYS[1], ARGV[1], ARGV[2])
`)

// hydrateScript merges many channels of one user at once and then marks the
// hash complete (field ":loaded", which no channel id can equal), so later
// reads trust the hash alone. KEYS[1] = user hash; ARGV = channel, value
// pairs, as for mergeScript.
var hydrateScript = redis.NewScript(luaCommon + `
for i = 1, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1]) end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
`)

// mergeManyScript is hydrateScript without the completeness marker.
var mergeManyScript = redis.NewScript(luaCommon + `
for i = 1, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1]) end
return 1
`)
