-- cvget(key) is a channel value's five parts ("-" where not known);
-- cvset(key, parts) writes them and returns the value.
local function cvget(k)
  local v = redis.call('GET', k)
  if not v then return {"-", "-", "-", "-", "-"} end
  local f, i = {}, 1
  while #f < 4 do
    local j = string.find(v, " ", i, true)
    if not j then break end
    f[#f+1] = string.sub(v, i, j - 1)
    i = j + 1
  end
  f[#f+1] = string.sub(v, i)
  if #f < 5 then f[4], f[5] = "-", "-" end
  return f
end
local function cvset(k, f)
  local v = table.concat(f, " ", 1, 5)
  redis.call('SET', k, v)
  return v
end
