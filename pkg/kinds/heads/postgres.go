package heads

import (
	"context"
	_ "embed"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

var (
	//go:embed write.sql
	writeSQL string
	//go:embed read.sql
	readSQL string
	//go:embed page.sql
	pageSQL string
)

// Store is the kind's storage in Postgres and Redis. It is two pointers:
// make one where it is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
}

// NewStore is the kind's storage on pg and rs (either may be nil when
// only the other is used).
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store { return Store{pg: pg, redis: rs} }

// WritePG max-merges heads into channel_heads in one statement and
// returns how many rows changed. Heads must be unique per channel.
func (s Store) WritePG(ctx context.Context, heads []channel.Head) (int64, error) {
	if len(heads) == 0 {
		return 0, nil
	}
	// The rows in key order: concurrent writers lock them in one order.
	sorted := slices.Clone(heads)
	slices.SortFunc(sorted, func(a, b channel.Head) int { return strings.Compare(a.Channel, b.Channel) })
	n := len(sorted)
	chs, seqs, msgs, times := make([]string, n), make([]int64, n), make([]string, n), make([]int64, n)
	now := time.Now().UnixMilli()
	for i, h := range sorted {
		chs[i], seqs[i], msgs[i], times[i] = h.Channel, h.Seq, h.MessageID, h.UpdatedAtUnixMs
		if times[i] <= 0 {
			times[i] = now
		}
	}
	tag, err := s.pg.Pool().Exec(ctx, writeSQL, chs, seqs, msgs, times)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns the heads of the listed channels that have one, in
// channel order.
func (s Store) ReadPG(ctx context.Context, channels []string) ([]channel.Head, error) {
	return s.query(ctx, readSQL, channels)
}

// PagePG returns up to limit heads of channels after the given one, in
// channel order: the drift sweep's walk ("" starts at the beginning).
func (s Store) PagePG(ctx context.Context, after string, limit int) ([]channel.Head, error) {
	return s.query(ctx, pageSQL, after, limit)
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]channel.Head, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (channel.Head, error) {
		var h channel.Head
		err := row.Scan(&h.Channel, &h.Seq, &h.MessageID, &h.UpdatedAtUnixMs)
		return h, err
	})
	return out, pgstore.Classified(err)
}
