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
  if #t < 4 or #t > 7 then return nil end
  local s = {rm=t[2], dev=t[3], ts=t[4]}
  s.re, s.rs = pos(t[1])
  if #t >= 6 then s.de, s.ds = pos(t[5]) s.dm = t[6] else s.de, s.ds, s.dm = s.re, s.rs, s.rm end
  if #t == 5 then s.pe, s.ps = pos(t[5]) elseif #t == 7 then s.pe, s.ps = pos(t[7]) end
  return s
end
local function encpos(e, q)
  if e ~= "0" then return e .. "." .. q end
  return q
end
local function enc(s)
  local v = encpos(s.re, s.rs) .. " " .. s.rm .. " " .. s.dev .. " " .. s.ts
  if s.de ~= s.re or s.ds ~= s.rs or s.dm ~= s.rm then
    v = v .. " " .. encpos(s.de, s.ds) .. " " .. s.dm
  end
  if s.pe then v = v .. " " .. encpos(s.pe, s.ps) end
  return v
end
-- epoch is the current read epoch of a parsed state: the greater of both
-- read cursors' ("0" for none).
local function epoch(s)
  if s.pe and cmp(s.pe, s.re) > 0 then return s.pe end
  return s.re
end
-- merge applies receipt.Merge to the field: the public read the greater by
-- (seq, epoch), the private read the greatest by (epoch, seq) of both
-- sides' reads and private reads, delivered the greater, raised to the seq
-- of the incoming and the stored read (reading implies delivery, by seq,
-- delivered keeping its epoch), a private read not ahead of the read
-- dropped. An incoming epoch "-" (receipt.EpochCurrent)
-- is resolved to the stored read epoch first; with strict, an incoming
-- read or private read of an explicit epoch older than it is refused whole
-- (stale 1), as is one ahead of it (stale 2: receipt.EpochAhead). fresh, when given, is what an empty field takes (the incoming
-- value resolved at epoch 0 and merged into nothing, encoded by the
-- caller), so a new field costs no parsing. Returns {changed, value,
-- resolved epoch, stale}; a plain merge (not strict) may answer the first
-- two only.
local function merge(key, field, inc, strict, fresh)
  local cur = redis.call('HGET', key, field)
  if inc == "" then return {0, cur or "", "0", 0} end
  if not cur and fresh then
    if fresh == "" then return {0, "", "0", 0} end
    redis.call('HSET', key, field, fresh)
    return {1, fresh, "0", 0}
  end
  if cur == inc then
    -- a duplicate: only a mark (strict) needs the epoch, so only it parses
    if strict ~= "1" then return {0, cur} end
    local s = parse(cur)
    return {0, cur, s and epoch(s) or "0", 0}
  end
  local s = cur and parse(cur)
  if not s then s = {re="0", rs="0", rm="", de="0", ds="0", dm="", dev="", ts="0"} end
  if s.pe and cmppos(s.pe, s.ps, s.re, s.rs) <= 0 then s.pe, s.ps = nil, nil end
  local n = parse(inc)
  -- The epoch is resolved and checked for marks only; a plain merge (the
  -- repair paths) answers {changed, value}, as before marks existed.
  local e = "0"
  if strict == "1" then
    e = epoch(s)
    if n.re == "-" then n.re = e
    elseif (n.re ~= "0" or n.rs ~= "0") and cmp(n.re, e) < 0 then return {0, cur or "", e, 1} end
    if n.pe == "-" then n.pe = e
    elseif n.pe and cmp(n.pe, e) < 0 then return {0, cur or "", e, 1} end
    -- an explicit epoch ahead of the stored one (receipt.EpochAhead):
    -- only mark-unread moves the epoch forward
    if (n.re ~= "0" or n.rs ~= "0") and cmp(n.re, e) > 0 then return {0, cur or "", e, 2} end
    if n.pe and cmp(n.pe, e) > 0 then return {0, cur or "", e, 2} end
  end
  local ore, ors, orm, ode, ods, ope, ops = s.re, s.rs, s.rm, s.de, s.ds, s.pe, s.ps
  -- the user's own position: the (epoch, seq)-greatest of both sides'
  -- reads and private reads
  local we, ws = ore, ors
  if ope and cmppos(ope, ops, we, ws) > 0 then we, ws = ope, ops end
  if cmppos(n.re, n.rs, we, ws) > 0 then we, ws = n.re, n.rs end
  if n.pe and cmppos(n.pe, n.ps, we, ws) > 0 then we, ws = n.pe, n.ps end
  -- the public read: the greatest by (seq, epoch), so it never moves back
  if cmppos(n.rs, n.re, s.rs, s.re) > 0 then s.re, s.rs, s.rm = n.re, n.rs, n.rm end
  s.pe, s.ps = we, ws
  if cmppos(n.de, n.ds, s.de, s.ds) > 0 then s.de, s.ds, s.dm = n.de, n.ds, n.dm end
  if cmp(n.rs, s.ds) > 0 then s.ds, s.dm = n.rs, n.rm end
  if cmp(ors, s.ds) > 0 then s.ds, s.dm = ors, orm end
  if s.pe and cmppos(s.pe, s.ps, s.re, s.rs) <= 0 then s.pe, s.ps = nil, nil end
  if s.re == ore and s.rs == ors and s.de == ode and s.ds == ods and s.pe == ope and s.ps == ops then
    if strict ~= "1" then return {0, cur or ""} end
    return {0, cur or "", e, 0}
  end
  s.dev = n.dev
  if cmp(n.ts, s.ts) > 0 then s.ts = n.ts end
  local v = enc(s)
  redis.call('HSET', key, field, v)
  if strict ~= "1" then return {1, v} end
  return {1, v, e, 0}
end
`

// mergeScript merges one channel's state into a user's hash.
// KEYS[1] = user hash, KEYS[2] (optional) = the user's tombstone; ARGV =
// channel, encoded value (encodeValue or encodeMark), strict ("1": refuse
// a stale explicit epoch), and what an empty field takes (encodeValue of
// the value resolved at epoch 0). Returns {changed (0/1), merged value in
// either layout ("" = no state), the stored read epoch the incoming "-"
// epochs resolved to, stale (0/1), then with KEYS[2] the user's erasure
// generation (decimal, "0" when known never erased, "-1" when Redis holds
// no tombstone hash: GenerationUnknown)}; a plain merge (strict "0")
// without KEYS[2] may leave out all but the first two. The generation is
// read in the same script as the merge, so the event the gateway stamps
// with it is ordered against an erasure (eraseScript) exactly as its
// Redis write is.
var mergeScript = redis.NewScript(luaCommon + `
-- a mark (strict) never merges into a hash Redis lost (stale 4)
if ARGV[3] == "1" and redis.call('HEXISTS', KEYS[1], ':loaded') == 0 then return {0, "", "0", 4} end
local r = merge(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if KEYS[2] then
  r[3], r[4] = r[3] or "0", r[4] or 0
  r[5] = redis.call('HGET', KEYS[2], 'g') or "-1"
end
return r
`)

// hydrateScript merges many channels of one user at once and then marks the
// hash complete (field ":loaded", which no channel id can equal), so later
// reads trust the hash alone. KEYS[1] = user hash, KEYS[2] (optional) =
// the incarnation marker the restore waited for; ARGV = with KEYS[2] its
// generation, then channel, value pairs, as for mergeScript (never
// strict). Returns 0, having changed nothing, when the marker is no
// longer of that generation (Redis lost data again meanwhile).
var hydrateScript = redis.NewScript(luaCommon + luaIntact + `
local from = 1
if KEYS[2] then
  if not intact(KEYS[2], ARGV[1]) then return 0 end
  from = 2
end
for i = from, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1], "0", ARGV[i+1]) end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
`)

// mergeManyScript is hydrateScript without the completeness marker.
var mergeManyScript = redis.NewScript(luaCommon + `
for i = 1, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1], "0", ARGV[i+1]) end
return 1
`)

// markUnreadScript moves a user's private read in a channel to seq-1 at
// the epoch after the one the client saw (receipt.MarkUnread); the public
// read does not move. KEYS[1] = user hash, KEYS[2] (optional) = the user's
// tombstone; ARGV = channel, seq-1 (base 62), device, time (base 62),
// receipt.MaxEpoch (base 62), the epoch the client saw (base 62; "" for
// the stored read epoch). Returns mergeScript's answer, its epoch being
// the one seen (a retry passes it to change nothing twice), with KEYS[2]
// the user's erasure generation read in the same script (as mergeScript);
// stale 2 when the epoch seen is ahead of the stored one
// (receipt.EpochAhead), stale 3 when it is at receipt.MaxEpoch, stale 4
// when the user's hash is not loaded (nothing changed in any case).
var markUnreadScript = redis.NewScript(luaCommon + `
-- inc62 adds one to a base-62 numeral.
local function inc62(d)
  local i = #d
  local out = ""
  while i > 0 do
    local k = string.find(D, string.sub(d, i, i), 1, true)
    if k < 62 then return string.sub(d, 1, i - 1) .. string.sub(D, k + 1, k + 1) .. out end
    out = "0" .. out
    i = i - 1
  end
  return "1" .. out
end
-- never into a hash Redis lost (stale 4)
if redis.call('HEXISTS', KEYS[1], ':loaded') == 0 then return {0, "", "0", 4} end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local e = "0"
if cur then local s = parse(cur) if s then
  if s.pe and cmppos(s.pe, s.ps, s.re, s.rs) <= 0 then s.pe = nil end
  e = epoch(s)
end end
local seen = e
if ARGV[6] ~= "" then
  seen = ARGV[6]
  -- only a mark-unread that saw the stored epoch moves past it
  if cmp(seen, e) > 0 then return {0, cur or "", e, 2} end
end
-- the epoch is bounded (receipt.MaxEpoch, ARGV[5] in base 62): at the
-- bound, nothing changes and the answer says so (stale 3)
if cmp(seen, ARGV[5]) >= 0 then return {0, cur or "", seen, 3} end
local r = merge(KEYS[1], ARGV[1], "0  " .. ARGV[3] .. " " .. ARGV[4] .. " " .. inc62(seen) .. "." .. ARGV[2], "0")
r[3], r[4] = seen, 0
if KEYS[2] then r[5] = redis.call('HGET', KEYS[2], 'g') or "-1" end
return r
`)
