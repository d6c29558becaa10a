-- Merges registers into channel_members: $1..$6 = channel ids, user ids
-- (unique keys, in key order), member, version seqs, version times (ms),
-- join seqs. The greater (version seq, version time, member, join seq)
-- wins, channel.Membership.Compare's order (false < true).
INSERT INTO channel_members AS t (channel_id, user_id, member, version_seq, version_ms, join_seq)
SELECT c, u, m, vs, vm, js
FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[], $5::bigint[], $6::bigint[]) AS x(c, u, m, vs, vm, js)
ON CONFLICT (channel_id, user_id) DO UPDATE SET
    member = excluded.member, version_seq = excluded.version_seq,
    version_ms = excluded.version_ms, join_seq = excluded.join_seq
WHERE (excluded.version_seq, excluded.version_ms, excluded.member, excluded.join_seq)
    > (t.version_seq, t.version_ms, t.member, t.join_seq)
