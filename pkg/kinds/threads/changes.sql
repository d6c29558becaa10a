-- stateupsert.sql (its parameters) answering, as the channels' change
-- feed statement does (pgstore), every key's public cursors once it ran
-- and whether the user shares each kind: the thread change feed. The
-- line naming stateupsert.sql is replaced by it, and {settings} by the
-- settings kind's table (postgres.go).
WITH up AS (
-- stateupsert.sql
RETURNING t.user_id, t.channel_id, t.root_seq, t.read_epoch, t.read_seq, t.delivered_epoch, t.delivered_seq)
SELECT k.u, k.c, k.r,
       COALESCE(up.read_epoch, o.read_epoch, -1), COALESCE(up.read_seq, o.read_seq, -1),
       COALESCE(up.delivered_epoch, o.delivered_epoch, -1), COALESCE(up.delivered_seq, o.delivered_seq, -1),
       COALESCE(s.share_read, true), COALESCE(s.share_delivered, true)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(u, c, r)
LEFT JOIN up ON up.user_id = k.u AND up.channel_id = k.c AND up.root_seq = k.r
LEFT JOIN thread_states o ON o.user_id = k.u AND o.channel_id = k.c AND o.root_seq = k.r
LEFT JOIN {settings} s ON s.user_id = k.u
