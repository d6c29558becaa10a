-- seqrun(z): how a sorted set z of seqs (member and score the seq, exact
-- below 2^53) changes one reader's counts. ARGV = the reader's effective
-- read seq, the head, then seqs to look up (the reader's mentions above
-- the read). Returns {-1} when z is gone, else {the members in (read,
-- head], the first seq above the read that is not a member, the looked-up
-- seqs that are members…}. A run of members after the read is searched
-- by halving (each step a ZCOUNT): O(log(run) log n), never a walk of the
-- run, and at most 64 steps whatever the values.
local function seqrun(z)
  if redis.call('EXISTS', z) == 0 then return {-1} end
  local read, head = tonumber(ARGV[1]), tonumber(ARGV[2])
  local lo = '(' .. ARGV[1]
  local n = redis.call('ZCOUNT', z, lo, ARGV[2])
  local first = read + 1
  local function all(x) return redis.call('ZCOUNT', z, lo, string.format('%.0f', x)) == x - read end
  if n > 0 and redis.call('ZSCORE', z, string.format('%.0f', read + 1)) then
    if all(head) then
      first = head + 1
    else
      local a, b = first, head -- all(a), not all(b)
      -- Seqs are exact doubles (at most 2^53-1, checked where they enter),
      -- so halving ends within 53 steps; the step bound keeps a value that
      -- slipped past the checks from spinning the script (and Redis).
      local steps = 0
      while b - a > 1 and steps < 64 do
        steps = steps + 1
        local mid = math.floor((a + b) / 2)
        if all(mid) then a = mid else b = mid end
      end
      first = b
    end
  end
  local out = {n, string.format('%.0f', first)}
  for i = 3, #ARGV do
    if redis.call('ZSCORE', z, ARGV[i]) then out[#out+1] = ARGV[i] end
  end
  return out
end
