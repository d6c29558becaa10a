-- How a set's deletions change one user's counts, for a set whose count
-- is not read beforehand (a thread's): KEYS[1] = the set, KEYS[2] = its
-- count; ARGV = the effective read seq, the head, then the user's kept
-- mention seqs above the read (seqrun.lua). The count
-- absent, the set is unknown ({-1}); "0", nothing is deleted.
local c = redis.call('GET', KEYS[2])
if not c then return {-1} end
if c == '0' then return {0, string.format('%.0f', tonumber(ARGV[1]) + 1)} end
return seqrun(KEYS[1])
