-- Writes a user's change with a version from Redis' clock (TIME, in ms),
-- or one more than the stored version when that is not less, so the
-- change always wins over what it read and no gateway's clock orders two
-- changes. KEYS[1] = the user's hash, KEYS[2] = the user's tombstone;
-- ARGV = channel, "LEVEL MUTED_UNTIL_MS". Returns {1, register, the
-- user's erasure generation ("-1": Redis holds no tombstone)}.
local t = redis.call('TIME')
local v = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local sv = tonumber(nreg(cur)[3])
  if sv and sv >= v then v = sv + 1 end
end
local reg = ARGV[2] .. " " .. string.format("%d", v)
redis.call('HSET', KEYS[1], ARGV[1], reg)
redis.call('PERSIST', KEYS[1])
return {1, reg, redis.call('HGET', KEYS[2], 'g') or "-1"}
