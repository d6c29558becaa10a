-- Merges registers as thread.Merge. $1 users, $2 channels, $3 roots,
-- the cursors ($4 to $13, as the channels' upsert), $14 follow versions,
-- $15 following, $16 mention seqs (array literals: unnest takes no array
-- of arrays of different lengths), $17 the mention cap; in key order,
-- each row already merged into the empty register (WriteStatesPG).
-- The cursors merge as read_receipts' upsert does (pgstore): the public
-- read only when greater by (seq, epoch), the private read the greatest
-- own position. Delivered needs no raise to the read seq: every row
-- written already satisfies it. The device and time move only with a
-- cursor, since a row also changes for a follow or a mention alone. The
-- follow register takes the greater (version, following), false < true
-- as thread.Follow.Compare. The mentions are channel.MergeMentions: the
-- union, distinct, kept to the newest $17+1, ascending. The WHERE skips
-- rows where nothing changes, which avoids a dead tuple per duplicate.
INSERT INTO thread_states AS t (user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs)
SELECT u, c, r, re, rs, rm, de, ds, dm, pe, ps, dev, ts, fv, fl, ms::bigint[]
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[],
            $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::bigint[], $12::text[],
            $13::bigint[], $14::bigint[], $15::boolean[], $16::text[])
     AS x(u, c, r, re, rs, rm, de, ds, dm, pe, ps, dev, ts, fv, fl, ms)
ON CONFLICT (user_id, channel_id, root_seq) DO UPDATE SET
    read_epoch      = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_epoch ELSE t.read_epoch END,
    read_seq        = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_seq ELSE t.read_seq END,
    read_message_id = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_message_id ELSE t.read_message_id END,
    private_read_epoch = GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch),
    private_read_seq   = GREATEST(
        CASE WHEN t.private_read_epoch = GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch) THEN t.private_read_seq END,
        CASE WHEN t.read_epoch = GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch) THEN t.read_seq END,
        CASE WHEN excluded.private_read_epoch = GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch) THEN excluded.private_read_seq END,
        CASE WHEN excluded.read_epoch = GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch) THEN excluded.read_seq END),
    delivered_epoch      = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_epoch ELSE t.delivered_epoch END,
    delivered_seq        = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_seq ELSE t.delivered_seq END,
    delivered_message_id = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_message_id ELSE t.delivered_message_id END,
    device_id  = CASE WHEN ((excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch)
    OR ((excluded.read_epoch, excluded.read_seq) > (t.read_epoch, t.read_seq)
        AND (excluded.read_epoch, excluded.read_seq) > (t.private_read_epoch, t.private_read_seq))
    OR ((excluded.private_read_epoch, excluded.private_read_seq) > (t.private_read_epoch, t.private_read_seq)
        AND (excluded.private_read_epoch, excluded.private_read_seq) > (t.read_epoch, t.read_seq))
    OR (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq)) THEN excluded.device_id ELSE t.device_id END,
    updated_ms = CASE WHEN ((excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch)
    OR ((excluded.read_epoch, excluded.read_seq) > (t.read_epoch, t.read_seq)
        AND (excluded.read_epoch, excluded.read_seq) > (t.private_read_epoch, t.private_read_seq))
    OR ((excluded.private_read_epoch, excluded.private_read_seq) > (t.private_read_epoch, t.private_read_seq)
        AND (excluded.private_read_epoch, excluded.private_read_seq) > (t.read_epoch, t.read_seq))
    OR (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq)) THEN GREATEST(t.updated_ms, excluded.updated_ms) ELSE t.updated_ms END,
    follow_version_ms = CASE WHEN (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following) THEN excluded.follow_version_ms ELSE t.follow_version_ms END,
    following         = CASE WHEN (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following) THEN excluded.following ELSE t.following END,
    mention_seqs = ARRAY(SELECT m FROM (
    SELECT DISTINCT m FROM unnest(t.mention_seqs || excluded.mention_seqs) AS u(m) ORDER BY m DESC LIMIT $17 + 1) k
    ORDER BY m)
WHERE ((excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch)
    OR ((excluded.read_epoch, excluded.read_seq) > (t.read_epoch, t.read_seq)
        AND (excluded.read_epoch, excluded.read_seq) > (t.private_read_epoch, t.private_read_seq))
    OR ((excluded.private_read_epoch, excluded.private_read_seq) > (t.private_read_epoch, t.private_read_seq)
        AND (excluded.private_read_epoch, excluded.private_read_seq) > (t.read_epoch, t.read_seq))
    OR (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq))
   OR (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following)
   OR ARRAY(SELECT m FROM (
    SELECT DISTINCT m FROM unnest(t.mention_seqs || excluded.mention_seqs) AS u(m) ORDER BY m DESC LIMIT $17 + 1) k
    ORDER BY m) <> t.mention_seqs
