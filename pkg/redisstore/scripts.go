package redisstore

import "github.com/redis/go-redis/v9"

// A stored field value is "v1:re:rs:rm:de:ds:dm:dev:ts" (read epoch, seq,
// message id; delivered epoch, seq, message id; device; unix ms). Ids never
// contain ':' (receipt.ValidateID), so the split is unambiguous. Numbers are
// compared as decimal strings, not Lua numbers, because Lua's doubles lose
// precision above 2^53 and seqs are int64.
const luaCommon = `
local function cmpnum(a, b)
  if #a ~= #b then if #a < #b then return -1 else return 1 end end
  if a == b then return 0 end
  if a < b then return -1 else return 1 end
end
local function cmppos(ae, as, be, bs)
  local c = cmpnum(ae, be)
  if c ~= 0 then return c end
  return cmpnum(as, bs)
end
local function parse(v)
  local t = {}
  for part in string.gmatch(v, "([^:]*):?") do t[#t+1] = part end
  if t[1] ~= "v1" then return nil end
  return {re=t[2], rs=t[3], rm=t[4], de=t[5], ds=t[6], dm=t[7], dev=t[8], ts=t[9]}
end
local function merge(key, field, n)
  local cur = redis.call('HGET', key, field)
  local s = nil
  if cur then s = parse(cur) end
  if not s then s = {re="0", rs="0", rm="", de="0", ds="0", dm="", dev="", ts="0"} end
  local readUp = cmppos(n.re, n.rs, s.re, s.rs) > 0
  local delUp = cmppos(n.de, n.ds, s.de, s.ds) > 0
  if readUp then s.re, s.rs, s.rm = n.re, n.rs, n.rm end
  if delUp then s.de, s.ds, s.dm = n.de, n.ds, n.dm end
  -- reading implies delivery
  if cmppos(s.re, s.rs, s.de, s.ds) > 0 then s.de, s.ds, s.dm = s.re, s.rs, s.rm end
  local changed = 0
  if readUp or delUp then
    changed = 1
    s.dev = n.dev
    if cmpnum(n.ts, s.ts) > 0 then s.ts = n.ts end
    redis.call('HSET', key, field, table.concat({"v1", s.re, s.rs, s.rm, s.de, s.ds, s.dm, s.dev, s.ts}, ":"))
  end
  return {changed, table.concat({"v1", s.re, s.rs, s.rm, s.de, s.ds, s.dm, s.dev, s.ts}, ":")}
end
`

// mergeScript merges one channel's state into a user's hash.
// KEYS[1] = user hash; ARGV = channel, re, rs, rm, de, ds, dm, dev, ts.
// Returns {changed (0/1), merged value}.
var mergeScript = redis.NewScript(luaCommon + `
return merge(KEYS[1], ARGV[1], {re=ARGV[2], rs=ARGV[3], rm=ARGV[4], de=ARGV[5], ds=ARGV[6], dm=ARGV[7], dev=ARGV[8], ts=ARGV[9]})
`)

// hydrateScript merges many channels of one user at once and then marks the
// hash complete (field ":loaded", which no channel id can equal), so later reads trust the hash alone.
// KEYS[1] = user hash; ARGV = 9 values per channel, as for mergeScript.
var hydrateScript = redis.NewScript(luaCommon + `
for i = 1, #ARGV, 9 do
  merge(KEYS[1], ARGV[i], {re=ARGV[i+1], rs=ARGV[i+2], rm=ARGV[i+3], de=ARGV[i+4], ds=ARGV[i+5], dm=ARGV[i+6], dev=ARGV[i+7], ts=ARGV[i+8]})
end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
`)
