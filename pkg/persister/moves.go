package persister

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Cursor-move log and settings defaults.
const (
	// DetailThresholdDefault is the gateway's default detail threshold.
	DetailThresholdDefault = 50
	// MoveRetentionDefault keeps 90 days of moves (pkg/movelog drops
	// the older partitions).
	MoveRetentionDefault = 90 * 24 * time.Hour
)

// movesOf is the log rows of a window's fresh cursor rows: per (user,
// channel), its public read and delivered cursor at the window's end, at
// the time of the latest mark that moved them. Moves older than the
// oldest partition are left out (past the retention anyway), moves from a
// clock ahead are logged at now.
func (p *Persister) movesOf(rows []receipt.State, now time.Time) []readby.LoggedMove {
	since := readby.MovesKeptSince(now, p.cfg.MoveRetention).UnixMilli()
	out := make([]readby.LoggedMove, 0, 2*len(rows))
	for _, r := range rows {
		at := min(r.UpdatedAtUnixMs, now.UnixMilli())
		if at < since {
			continue
		}
		if !r.Read.Position.IsZero() {
			out = append(out, readby.LoggedMove{Key: r.Key, Side: readby.Read, Position: r.Read.Position, AtUnixMs: at})
		}
		if !r.Delivered.Position.IsZero() {
			out = append(out, readby.LoggedMove{Key: r.Key, Side: readby.Delivered, Position: r.Delivered.Position, AtUnixMs: at})
		}
	}
	return out
}

// moveJobs log a window's public moves. The log only dates read-by
// entries (the view's time stands in without it), so a failure is logged
// and counted, never retried past the window nor dead-lettered: it cannot
// hold a window's cursors back.
// One job per window: InsertMoves sizes the window's channels once and
// inserts only small tracked channels' moves.
func (p *Persister) moveJobs(rows []receipt.State) []job {
	moves := p.movesOf(rows, time.Now())
	if len(moves) == 0 {
		return nil
	}
	return []job{func(ctx context.Context, _ int) (int, map[rejection]error, error) {
		n, err := readby.NewStore(p.store, nil).InsertMoves(ctx, moves, p.cfg.DetailThreshold)
		p.m.movesLogged.Add(float64(n))
		if err != nil {
			p.log.Warn("logging cursor moves; read-by times fall back to the real-time view's", zap.Int("num_moves", len(moves)), zap.Error(err))
		}
		return 0, nil, nil
	}}
}
