package mentions

import (
	"context"
	_ "embed"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// A user's mentions live in mentions (sql/migrations), one row per
// (user, channel, seq), hash-partitioned by user. Writes are set unions
// and the retention a separate trim, so duplicates, reordering and
// replays are harmless; every read takes each key's newest cap+1 itself.
var (
	//go:embed insert.sql
	insertSQL string
	//go:embed trim.sql
	trimSQL string
	//go:embed user.sql
	userSQL string
	//go:embed range.sql
	rangeSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed erase.sql
	eraseSQL string
)

// WritePG adds mention seqs (a set union: an existing seq is left alone)
// in one statement and returns how many rows were new.
func (s Store) WritePG(ctx context.Context, ms []channel.Mentions) (int64, error) {
	var users, chs []string
	var seqs []int64
	for _, m := range ms {
		for _, q := range m.Seqs {
			users, chs, seqs = append(users, m.Key.User), append(chs, m.Key.Channel), append(seqs, q)
		}
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := s.pg.Pool().Exec(ctx, insertSQL, users, chs, seqs)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// TrimPG deletes, in one statement, the mentions of the listed keys that
// are no longer among their key's newest cap+1 (the retention of
// channel.Mentions), and returns how many rows went. Readers take the
// newest cap+1 themselves, so a trim that lags changes no count.
func (s Store) TrimPG(ctx context.Context, keys []receipt.Key) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	// In key order, so concurrent trims never deadlock.
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, receipt.Key.Compare)
	users, chs := make([]string, len(sorted)), make([]string, len(sorted))
	for i, k := range sorted {
		users[i], chs[i] = k.User, k.Channel
	}
	tag, err := s.pg.Pool().Exec(ctx, trimSQL, users, chs, s.mentionCap)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns a user's mentions per channel, each key's newest cap+1
// seqs ascending (what Redis keeps), for all channels or the listed
// ones, in channel order.
func (s Store) ReadPG(ctx context.Context, user string, channels []string) ([]channel.Mentions, error) {
	return s.query(ctx, userSQL, user, channels, s.mentionCap)
}

// RangePG returns a user's mentions in the channels of (after, upTo] (""
// after: from the first; "" upTo: to the last), each key's newest cap+1
// seqs ascending, in channel order: the pages of the user's memberships
// give the ranges.
func (s Store) RangePG(ctx context.Context, user, after, upTo string) ([]channel.Mentions, error) {
	return s.query(ctx, rangeSQL, user, after, upTo, s.mentionCap)
}

// PagePG returns the mentions of up to limit keys after the given one,
// in key order, each key's newest cap+1 seqs ascending: the drift
// sweep's walk.
func (s Store) PagePG(ctx context.Context, after receipt.Key, limit int) ([]channel.Mentions, error) {
	return s.query(ctx, pageSQL, after.User, after.Channel, limit, s.mentionCap)
}

// query runs a read whose rows are (user, channel, seq) in key order and
// groups them by key.
func (s Store) query(ctx context.Context, sql string, args ...any) ([]channel.Mentions, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	var out []channel.Mentions
	var k receipt.Key
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &seq}, func() error {
		if n := len(out); n == 0 || out[n-1].Key != k {
			out = append(out, channel.Mentions{Key: k})
		}
		out[len(out)-1].Seqs = append(out[len(out)-1].Seqs, seq)
		return nil
	})
	return out, pgstore.Classified(err)
}
