package groupmentions

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
)

// A channel's group mentions live in channel_group_mentions
// (sql/migrations), one row per (channel, seq), the newest cap+1 per
// channel.
var (
	//go:embed insert.sql
	insertSQL string
	//go:embed trim.sql
	trimSQL string
	//go:embed channels.sql
	channelsSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed redact.sql
	redactSQL string
)

// WritePG merges group mentions into Postgres (one row per seq; a row
// repeated is a no-op) and returns how many rows changed.
func (s Store) WritePG(ctx context.Context, gms []channel.GroupMentions) (int64, error) {
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
	tag, err := s.pg.Pool().Exec(ctx, insertSQL, chs, seqs, senders)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// TrimPG deletes the group mentions of the listed channels that are no
// longer among their channel's newest cap+1. Readers take the newest
// cap+1 themselves, so a trim that lags changes no count.
func (s Store) TrimPG(ctx context.Context, channels []string) (int64, error) {
	tag, err := s.pg.Pool().Exec(ctx, trimSQL, channels, s.mentionCap)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns the newest cap+1 group mentions of each listed channel
// that has any, in channel order, each ascending.
func (s Store) ReadPG(ctx context.Context, channels []string) ([]channel.GroupMentions, error) {
	if len(channels) == 0 {
		return nil, nil
	}
	rows, err := s.pg.Pool().Query(ctx, channelsSQL, channels, s.mentionCap)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	return collect(rows)
}

// PagePG returns the group mentions of up to limit channels after the
// given one, in channel order, each channel's newest cap+1 ascending:
// the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after string, limit int) ([]channel.GroupMentions, error) {
	rows, err := s.pg.Pool().Query(ctx, pageSQL, after, limit, s.mentionCap)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	return collect(rows)
}

func collect(rows pgx.Rows) ([]channel.GroupMentions, error) {
	defer rows.Close()
	var out []channel.GroupMentions
	for rows.Next() {
		var ch string
		var m channel.GroupMention
		if err := rows.Scan(&ch, &m.Seq, &m.Sender); err != nil {
			return nil, pgstore.Classified(err)
		}
		if len(out) == 0 || out[len(out)-1].Channel != ch {
			out = append(out, channel.GroupMentions{Channel: ch})
		}
		last := &out[len(out)-1]
		last.Mentions = append(last.Mentions, m)
	}
	return out, pgstore.Classified(rows.Err())
}
