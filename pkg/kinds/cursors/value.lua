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
