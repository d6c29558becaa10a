-- Cursor moves as HOT (heap-only) updates.
--
-- The (channel_id, read_seq) index covered a column every mark changes, so
-- no cursor move could be a heap-only update: each one wrote a new entry in
-- both indexes and left a dead tuple behind. No query uses it yet; the
-- per-channel lookups of small groups get their own structure, which only
-- small channels pay for.
DROP INDEX IF EXISTS read_receipts_channel_read;

-- Free space on each page for the new version of a row, so that a cursor
-- move stays on its page (HOT) and the page prunes the old version itself.
-- 85: a page of about sixty rows keeps room for several of them to move
-- between prunes, for 15 % more pages than a full pack (measured in
-- BENCHMARKS.md, "HOT updates"). New pages follow it; existing ones as they
-- are rewritten.
ALTER TABLE read_receipts_p0 SET (fillfactor = 85);
ALTER TABLE read_receipts_p1 SET (fillfactor = 85);
ALTER TABLE read_receipts_p2 SET (fillfactor = 85);
ALTER TABLE read_receipts_p3 SET (fillfactor = 85);
ALTER TABLE read_receipts_p4 SET (fillfactor = 85);
ALTER TABLE read_receipts_p5 SET (fillfactor = 85);
ALTER TABLE read_receipts_p6 SET (fillfactor = 85);
ALTER TABLE read_receipts_p7 SET (fillfactor = 85);
