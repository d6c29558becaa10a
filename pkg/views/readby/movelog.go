package readby

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// The cursor-move log (cursor_moves, migration 0006): public cursor
// moves of members of small channels, range-partitioned by week on at,
// which read-by dates its members' reads from (FirstReached). The
// persister writes it (InsertMoves), pkg/movelog keeps its partitions.
var (
	//go:embed small_channels.sql
	smallChannelsTemplate string
	smallChannelsSQL      = kind.ComposeSQL(smallChannelsTemplate, kindTables)
	//go:embed insert_moves.sql
	insertMovesTemplate string
	insertMovesSQL      = kind.ComposeSQL(insertMovesTemplate, kindTables)
	//go:embed erase_moves.sql
	eraseMovesSQL string
)

// MoveLogErasure is the move log's part of an erasure, run beside the
// kinds' (kind.PGErasure) by every writer that applies one.
var MoveLogErasure = pgstore.Erasure{ChannelDeletes: []string{eraseMovesSQL}}

// MoveLogTable is the move log's table, for the erasure's checks beside
// kinds.ErasedTables.
const MoveLogTable = "cursor_moves"

// MoveLogRows counts the log's rows of channel (what the load tool's
// move-log run measures).
func (s Store) MoveLogRows(ctx context.Context, channel string) (int64, error) {
	var n int64
	if err := s.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM cursor_moves WHERE channel_id = $1`, channel).Scan(&n); err != nil {
		return 0, pgstore.Classified(fmt.Errorf("counting the move-log rows of %s: %w", channel, err))
	}
	return n, nil
}

// LoggedMove is one public cursor move for the log.
type LoggedMove struct {
	Key      receipt.Key
	Side     Side
	Position receipt.Position
	AtUnixMs int64
}

// InsertMoves logs moves, keeping only those (1) of joined members of
// channels of at most threshold joined members (read-by dates members
// only: a non-member's or an untracked channel's move would never be
// read), (2) of a side the user shares (user_settings;
// no row: shares), (3) that advance the log: no logged move of the same
// (channel, user, kind) at or past it. Duplicates and replays therefore
// add nothing. It returns the rows inserted.
//
// The channels are sized first, once per channel of the call, by a
// statement of only their ids; the moves of channels that are untracked or
// large (most marks of a big deployment) never reach the insert's arrays.
// The insert, in statements of movesChunk moves, checks again.
func (s Store) InsertMoves(ctx context.Context, moves []LoggedMove, threshold int) (int64, error) {
	if len(moves) == 0 {
		return 0, nil
	}
	seen := map[string]bool{}
	var channels []string
	for _, m := range moves {
		if !seen[m.Key.Channel] {
			seen[m.Key.Channel] = true
			channels = append(channels, m.Key.Channel)
		}
	}
	rows, err := s.pg.Pool().Query(ctx, smallChannelsSQL, channels, threshold)
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("sizing %d channels for the cursor-move log: %w", len(channels), err))
	}
	small, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("sizing %d channels for the cursor-move log: %w", len(channels), err))
	}
	if len(small) == 0 {
		return 0, nil
	}
	keep := make(map[string]bool, len(small))
	for _, c := range small {
		keep[c] = true
	}
	var kept []LoggedMove
	for _, m := range moves {
		if keep[m.Key.Channel] {
			kept = append(kept, m)
		}
	}
	var total int64
	for start := 0; start < len(kept); start += movesChunk {
		n, err := s.insertMoves(ctx, kept[start:min(start+movesChunk, len(kept))], threshold)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// movesChunk bounds the moves of one insert statement.
const movesChunk = 500

func (s Store) insertMoves(ctx context.Context, moves []LoggedMove, threshold int) (int64, error) {
	n := len(moves)
	chs, users, kinds := make([]string, n), make([]string, n), make([]string, n)
	epochs, seqs := make([]int64, n), make([]int64, n)
	ats := make([]time.Time, n)
	for i, m := range moves {
		chs[i], users[i], kinds[i] = m.Key.Channel, m.Key.User, string(m.Side)
		epochs[i], seqs[i], ats[i] = m.Position.Epoch, m.Position.Seq, time.UnixMilli(m.AtUnixMs).UTC()
	}
	// The channels' sizes are counted once per channel of the batch, and
	// only moves of small tracked channels are looked at further (an
	// untracked channel's moves cost one count for the whole batch).
	tag, err := s.pg.Pool().Exec(ctx, insertMovesSQL, chs, users, kinds, epochs, seqs, ats, threshold)
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("logging %d cursor moves: %w", n, err))
	}
	return tag.RowsAffected(), nil
}

// movePartitionWeek is the width of a cursor_moves partition.
const movePartitionWeek = 7 * 24 * time.Hour

// weekStart is the Monday 00:00 UTC at or before t.
func weekStart(t time.Time) time.Time {
	t = t.UTC().Truncate(24 * time.Hour)
	return t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7))
}

// MovesKeptSince is the oldest time the log keeps rows of at now with
// this retention: the start of the oldest partition not yet dropped.
// The persister logs no move older than it (there is no partition for it).
func MovesKeptSince(now time.Time, retention time.Duration) time.Time {
	return weekStart(now.Add(-retention))
}

// MaintainMovePartitions creates the weekly partitions of cursor_moves
// from the one holding now−retention to ahead past now, and drops the
// partitions that end before now−retention (whole tables: no row-by-row
// delete). Safe to run concurrently (one transaction under an advisory
// lock); pkg/movelog runs it at start and from its leader loop. It
// returns the partitions created and dropped.
func (s Store) MaintainMovePartitions(ctx context.Context, now time.Time, retention, ahead time.Duration) (created, dropped []string, err error) {
	keep := MovesKeptSince(now, retention)
	err = pgx.BeginFunc(ctx, s.pg.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cursor_moves_partitions:' || current_schema(), 0))`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
			JOIN pg_namespace n ON n.oid = p.relnamespace
			WHERE p.relname = 'cursor_moves' AND n.nspname = current_schema()`)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		exists := map[string]bool{}
		for _, n := range names {
			exists[n] = true
			day, ok := strings.CutPrefix(n, "cursor_moves_w")
			if !ok {
				continue
			}
			start, perr := time.Parse("20060102", day)
			if perr != nil || !start.Add(movePartitionWeek).After(keep) {
				if perr == nil {
					if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{n}.Sanitize()); err != nil {
						return err
					}
					dropped = append(dropped, n)
				}
			}
		}
		for w := keep; w.Before(now.Add(ahead)); w = w.Add(movePartitionWeek) {
			name := "cursor_moves_w" + w.Format("20060102")
			if exists[name] {
				continue
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s PARTITION OF cursor_moves FOR VALUES FROM ('%s') TO ('%s')`,
				pgx.Identifier{name}.Sanitize(), w.Format(time.RFC3339), w.Add(movePartitionWeek).Format(time.RFC3339))); err != nil {
				return err
			}
			created = append(created, name)
		}
		return nil
	})
	if err != nil {
		return nil, nil, pgstore.Classified(fmt.Errorf("maintaining the cursor_moves partitions: %w", err))
	}
	return created, dropped, nil
}
