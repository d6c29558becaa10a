-- Raises a channel's head and keeps the message's id among the channel's
-- newest. KEYS[1] = the channel value, KEYS[2] = the message-id set;
-- ARGV = seq, message id, time (numbers base 62), then the seq in decimal
-- and how many ids to keep. Returns {changed, the channel value}.
if ARGV[2] ~= "" and ARGV[4] ~= "0" then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[4] .. " " .. ARGV[2])
  local keep = tonumber(ARGV[5])
  if redis.call('ZCARD', KEYS[2]) > keep + keep / 10 then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -keep - 1)
  end
end
local f = cvget(KEYS[1])
local ts = ARGV[3]
if f[1] ~= "-" then
  if cmp(ARGV[1], f[1]) <= 0 then return {0, table.concat(f, " ", 1, 5)} end
  if cmp(f[3], ts) > 0 then ts = f[3] end
end
f[1], f[2], f[3] = ARGV[1], ARGV[2], ts
return {1, cvset(KEYS[1], f)}
