package redisstore

// luaCommon is the Lua functions every script over base-62 numerals
// starts with (LuaCommon): cmp(a, b) and cmppos(ae, as, be, bs) order
// numerals and positions, b62(d) converts a decimal numeral (exactly: two
// limbs below 2^53).
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
`
