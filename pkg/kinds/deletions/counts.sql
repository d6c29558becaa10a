-- Counts, per query ($1 channels, $3 reads, $4 heads, $5 roots; $2 the
-- window), the deletions in (read, head] and finds the first kept seq,
-- in one ordered pass over them: the k-th deletion above the read is
-- read+k exactly while the run of deletions starting at read+1 lasts
-- (seqs are distinct), so the run's length is how many rows have seq =
-- read + row_number, and the first kept seq is one past it. Linear in
-- the deletions counted whatever the planner knows (a self anti-join to
-- find the run's end was quadratic on a table without statistics:
-- minutes for a run of 30,000).
SELECT q.i, x.n, q.r + 1 + x.run
FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS q(c, r, h, t, i)
CROSS JOIN LATERAL (SELECT (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = q.c AND x.root_seq = q.t) AS floor) f
CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE y.seq = q.r + y.rn) AS run FROM (
  SELECT d.seq, row_number() OVER (ORDER BY d.seq) AS rn FROM channel_deletions d
  WHERE d.channel_id = q.c AND d.root_seq = q.t AND d.seq > greatest(q.r, f.floor) AND d.seq <= q.h) y) x
