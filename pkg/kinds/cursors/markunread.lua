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
