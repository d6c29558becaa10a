package movelog_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/readstate/receipts/pkg/movelog"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
)

// Every goroutine a test starts must be joined by its end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func (c *clock) set(t time.Time)   { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time    { return time.Unix(0, c.ns.Load()).UTC() }
func newClock(t time.Time) *clock  { c := &clock{}; c.set(t); return c }
func day(s string) time.Time       { d, _ := time.Parse(time.DateOnly, s); return d }
func at(s string, h int) time.Time { return day(s).Add(time.Duration(h) * time.Hour) }
func week(mondays ...string) []string {
	out := make([]string, len(mondays))
	for i, m := range mondays {
		out[i] = "cursor_moves_w" + day(m).Format("20060102")
	}
	return out
}

// partitions lists the cursor_moves partitions of the schema, in order.
func partitions(t *testing.T, st *pgstore.Store) []string {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT c.relname::text FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		JOIN pg_namespace n ON n.oid = p.relnamespace
		WHERE p.relname = 'cursor_moves' AND n.nspname = current_schema() ORDER BY 1`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// The upkeep's clock decides the partitions: at start they span the
// retention behind it and Ahead past it; once the clock moves ten weeks on,
// the leader's next pass drops every partition that ended before the
// retention and creates the new ones ahead.
func TestUpkeepDropsPastRetentionAndCreatesAhead(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	clk := newClock(at("2026-03-04", 12)) // a Wednesday
	u, err := movelog.New(movelog.Config{Postgres: schema.Store, Retention: 28 * 24 * time.Hour, Ahead: 14 * 24 * time.Hour,
		Every: 10 * time.Millisecond, LeaderCheckInterval: 10 * time.Millisecond, Now: clk.now})
	require.NoError(t, err)
	require.Empty(t, partitions(t, schema.Store), "migrated: no partition yet")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { require.NoError(t, u.Run(ctx)) })

	// The Monday weeks holding now−28d (Feb 4) to now+14d (Mar 18).
	first := week("2026-02-02", "2026-02-09", "2026-02-16", "2026-02-23", "2026-03-02", "2026-03-09", "2026-03-16")
	require.Eventually(t, func() bool { return slices.Equal(partitions(t, schema.Store), first) }, 10*time.Second, 5*time.Millisecond,
		"the pass at start creates the retention's weeks and two ahead")
	require.Eventually(t, func() bool { return u.Status() == "leader (holds the Postgres advisory lock)" },
		10*time.Second, 5*time.Millisecond, "a lone replica leads")
	require.NoError(t, u.Ready(ctx))

	clk.set(at("2026-05-13", 12))
	// Now−28d is Apr 15: every first-pass week ended before its Monday.
	later := week("2026-04-13", "2026-04-20", "2026-04-27", "2026-05-04", "2026-05-11", "2026-05-18", "2026-05-25")
	require.Eventually(t, func() bool { return slices.Equal(partitions(t, schema.Store), later) }, 10*time.Second, 5*time.Millisecond,
		"the leader's pass drops the weeks past the retention and creates the new ones ahead")
}

// Pass is the one call into readby.Store.MaintainMovePartitions; it reports
// what it created and dropped, and a second pass at the same time changes
// nothing.
func TestPassReportsCreatedAndDropped(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	clk := newClock(at("2026-03-04", 12))
	u, err := movelog.New(movelog.Config{Postgres: schema.Store, Retention: 7 * 24 * time.Hour, Ahead: 7 * 24 * time.Hour, Now: clk.now})
	require.NoError(t, err)
	ctx := context.Background()

	created, dropped, err := u.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, week("2026-02-23", "2026-03-02", "2026-03-09"), created)
	require.Empty(t, dropped)
	created, dropped, err = u.Pass(ctx)
	require.NoError(t, err)
	require.Empty(t, created)
	require.Empty(t, dropped)

	clk.set(at("2026-03-11", 12))
	created, dropped, err = u.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, week("2026-03-16"), created)
	require.Equal(t, week("2026-02-23"), dropped)
	require.Equal(t, week("2026-03-02", "2026-03-09", "2026-03-16"), partitions(t, schema.Store))
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	_, err := movelog.New(movelog.Config{})
	require.ErrorContains(t, err, "Postgres is required")
	require.ErrorContains(t, err, "Retention, Ahead, Every and LeaderCheckInterval must be > 0")
}
