-- Merges registers into channel_notifications (notification.Merge): the
-- guard's tuple is notification.Register.Compare's order, so a row moves
-- only to a greater (version, level, muted until).
-- $1 users, $2 channels, $3 levels, $4 mute ends (ms), $5 versions (ms).
INSERT INTO channel_notifications AS t (user_id, channel_id, level, muted_until_ms, version_ms)
SELECT u, c, l, m, v
FROM unnest($1::text[], $2::text[], $3::smallint[], $4::bigint[], $5::bigint[]) AS x(u, c, l, m, v)
ON CONFLICT (user_id, channel_id) DO UPDATE SET
    level = excluded.level, muted_until_ms = excluded.muted_until_ms, version_ms = excluded.version_ms
WHERE (excluded.version_ms, excluded.level, excluded.muted_until_ms)
    > (t.version_ms, t.level, t.muted_until_ms)
