-- Merges settings registers into user_settings (privacy.Merge). The tie
-- rule compares (version, not share_read, not share_delivered) as
-- privacy.Merge does: false sorts below true, so NOT puts "shares less"
-- above; then the quieter default level.
-- $1 users, $2 share read, $3 share delivered, $4 versions (ms), $5 levels.
INSERT INTO user_settings AS t (user_id, share_read, share_delivered, version_ms, default_level)
SELECT * FROM unnest($1::text[], $2::boolean[], $3::boolean[], $4::bigint[], $5::smallint[])
ON CONFLICT (user_id) DO UPDATE SET share_read = excluded.share_read,
    share_delivered = excluded.share_delivered, version_ms = excluded.version_ms,
    default_level = excluded.default_level
WHERE (excluded.version_ms, NOT excluded.share_read, NOT excluded.share_delivered, excluded.default_level)
    > (t.version_ms, NOT t.share_read, NOT t.share_delivered, t.default_level)
