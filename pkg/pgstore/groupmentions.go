package pgstore

// A channel's group mentions (channel.GroupMentions): rows of
// channel_group_mentions, the newest cap+1 per channel.

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
)

// The least sender of a seq wins (channel.MergeGroupMentions).
const insertGroupMentionsSQL = `
INSERT INTO channel_group_mentions AS t (channel_id, seq, sender_id)
SELECT c, q, s FROM unnest($1::text[], $2::bigint[], $3::text[]) AS x(c, q, s)
ORDER BY c, q
ON CONFLICT (channel_id, seq) DO UPDATE SET sender_id = excluded.sender_id
WHERE excluded.sender_id < t.sender_id`

// InsertGroupMentions merges group mentions into Postgres (one row per
// seq; a row repeated is a no-op) and returns how many rows changed.
func (s *Store) InsertGroupMentions(ctx context.Context, gms []channel.GroupMentions) (int64, error) {
	var chs, senders []string
	var seqs []int64
	for _, g := range gms {
		// One row per seq in one statement (ON CONFLICT touches a row once).
		for _, m := range channel.MergeGroupMentions(nil, g.Mentions, len(g.Mentions)) {
			chs, seqs, senders = append(chs, g.Channel), append(seqs, m.Seq), append(senders, m.Sender)
		}
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, insertGroupMentionsSQL, chs, seqs, senders)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// TrimGroupMentions deletes the group mentions of the listed channels
// that are no longer among their channel's newest cap+1. Readers take the
// newest cap+1 themselves, so a trim that lags changes no count.
func (s *Store) TrimGroupMentions(ctx context.Context, channels []string, mentionCap int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
DELETE FROM channel_group_mentions m USING unnest($1::text[]) AS k(c)
WHERE m.channel_id = k.c
  AND m.seq < (SELECT x.seq FROM channel_group_mentions x WHERE x.channel_id = k.c
               ORDER BY x.seq DESC OFFSET $2 LIMIT 1)`, channels, mentionCap)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// GroupMentions returns the newest cap+1 group mentions of each listed
// channel that has any, in channel order, each ascending.
func (s *Store) GroupMentions(ctx context.Context, channels []string, mentionCap int) ([]channel.GroupMentions, error) {
	if len(channels) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT channel_id, seq, sender_id FROM (
		SELECT channel_id, seq, sender_id, row_number() OVER (PARTITION BY channel_id ORDER BY seq DESC) AS rn
		FROM channel_group_mentions WHERE channel_id = ANY($1)) r
		WHERE rn <= $2 + 1 ORDER BY channel_id, seq`, channels, mentionCap)
	if err != nil {
		return nil, classify(err)
	}
	return collectGroupMentions(rows)
}

// GroupMentionsPage returns the group mentions of up to limit channels
// after the given one, in channel order, each channel's newest cap+1
// ascending: the drift sweep's walk.
func (s *Store) GroupMentionsPage(ctx context.Context, after string, limit, mentionCap int) ([]channel.GroupMentions, error) {
	rows, err := s.pool.Query(ctx, `WITH chs AS (
		SELECT DISTINCT channel_id FROM channel_group_mentions WHERE channel_id > $1 ORDER BY channel_id LIMIT $2)
		SELECT channel_id, seq, sender_id FROM (
		SELECT g.channel_id, g.seq, g.sender_id, row_number() OVER (PARTITION BY g.channel_id ORDER BY g.seq DESC) AS rn
		FROM channel_group_mentions g JOIN chs USING (channel_id)) r
		WHERE rn <= $3 + 1 ORDER BY channel_id, seq`, after, limit, mentionCap)
	if err != nil {
		return nil, classify(err)
	}
	return collectGroupMentions(rows)
}

func collectGroupMentions(rows pgx.Rows) ([]channel.GroupMentions, error) {
	defer rows.Close()
	var out []channel.GroupMentions
	for rows.Next() {
		var ch string
		var m channel.GroupMention
		if err := rows.Scan(&ch, &m.Seq, &m.Sender); err != nil {
			return nil, classify(err)
		}
		if len(out) == 0 || out[len(out)-1].Channel != ch {
			out = append(out, channel.GroupMentions{Channel: ch})
		}
		last := &out[len(out)-1]
		last.Mentions = append(last.Mentions, m)
	}
	return out, classify(rows.Err())
}
