-- A register in the user's hash is "LEVEL MUTED_UNTIL_MS VERSION_MS"
-- (decimal). nreg splits one; ncmp compares two field by field as
-- notification.Register.Compare does: version, level, then mute end (cmp,
-- redisstore.LuaCmp, orders decimal numerals).
local function nreg(v)
  local t = {}
  for p in string.gmatch(v, "[^ ]+") do t[#t+1] = p end
  return t
end
local function ncmp(a, b)
  local c = cmp(a[3], b[3]) if c ~= 0 then return c end
  c = cmp(a[1], b[1]) if c ~= 0 then return c end
  return cmp(a[2], b[2])
end
