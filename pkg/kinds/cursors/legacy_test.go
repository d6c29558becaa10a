package cursors

import (
	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// The previous version's layout ("v1:re:rs:rm:de:ds:dm:dev:ts", decimal
// numbers) and its merge script, verbatim as they were before the compact
// layout (commit c4408de): the tests write v1 values with it, as a live
// Redis upgraded in place holds them, and the measurements compare the two
// layouts in the same run.
const v1LuaCommon = `
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

var v1MergeScript = redis.NewScript(v1LuaCommon + `
return merge(KEYS[1], ARGV[1], {re=ARGV[2], rs=ARGV[3], rm=ARGV[4], de=ARGV[5], ds=ARGV[6], dm=ARGV[7], dev=ARGV[8], ts=ARGV[9]})
`)

func v1Args(st receipt.State) ([]any, error) {
	return []any{st.Key.Channel,
		st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID,
		st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID,
		st.DeviceID, st.UpdatedAtUnixMs}, nil
}

var v1Layout = &layout{merge: v1MergeScript, args: v1Args}

// newV1Store is a Store that merges in the v1 layout (Get, Hydrate and the
// rest are the current code).
func newV1Store(rdb redis.UniversalClient, prefix string) Store {
	s := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: prefix}))
	s.layout = v1Layout
	return s
}
