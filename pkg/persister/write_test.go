package persister

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// newWriter is a Persister with only its write path: no Kafka client, so
// it must not hit an outage (which pauses fetching).
func newWriter(store *pgstore.Store, writers int) *Persister {
	return newPersister(Config{Store: store, Writers: writers}.withDefaults())
}

func writeState(user, channel string, seq int64) receipt.State {
	return receipt.State{
		Key:             receipt.Key{User: user, Channel: channel},
		Read:            receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: fmt.Sprintf("m%d", seq)},
		DeviceID:        "dev-1",
		UpdatedAtUnixMs: 1_700_000_000_000 + seq,
	}
}

func histogramCount(t *testing.T, h interface{ Write(*dto.Metric) error }) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func sortedStates(n int, prefix string) []receipt.State {
	rows := make([]receipt.State, 0, n)
	for u := range n {
		rows = append(rows, writeState(fmt.Sprintf("%s%05d", prefix, u), "c", int64(u+1)))
	}
	slices.SortFunc(rows, receipt.CompareStates)
	return rows
}

func TestChunkSplitsSortedRowsIntoDisjointStatements(t *testing.T) {
	t.Parallel()
	rows := sortedStates(1234, "u")
	stmts := chunk(rows, 500)
	require.Len(t, stmts, 3)
	require.Len(t, stmts[0], 500)
	require.Len(t, stmts[2], 234)
	var again []receipt.State
	for i, st := range stmts {
		again = append(again, st...)
		if i > 0 {
			require.Negative(t, stmts[i-1][len(stmts[i-1])-1].Key.Compare(st[0].Key), "statements hold disjoint, ordered key ranges")
		}
		require.Equal(t, len(st), cap(st), "a statement cannot append into the next")
	}
	require.Equal(t, rows, again)
	require.Empty(t, chunk[receipt.State](nil, 500))
}

// A rejected row is bisected out of its own statement only: every other
// statement is written once, and the failing one costs exactly what
// bisecting it alone costs.
func TestRejectedRowIsBisectedWithinItsStatement(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	ctx := context.Background()
	_, err := s.Store.Pool().Exec(ctx, `ALTER TABLE read_receipts ADD CONSTRAINT test_reject_device CHECK (device_id <> 'reject-me')`)
	require.NoError(t, err)

	rows := sortedStates(200, "g")
	rows[77].DeviceID = "reject-me"
	bad := rows[77]

	p := newWriter(s.Store, 4)
	p.cfg.StatementRows = 50
	stmts := chunk(rows, 50)
	require.Len(t, stmts, 4)
	rejectBad := func(part []receipt.State) error {
		for _, r := range part {
			if r.DeviceID == "reject-me" {
				return pgstore.ErrRejected
			}
		}
		return nil
	}
	alone, err := batch.Bisect(stmts[1], rejectBad, isRejected)
	require.NoError(t, err)
	wantWrites := 3 + alone.Writes

	written, rejected, err := p.write(ctx, rows)
	require.NoError(t, err)
	require.Equal(t, 199, written)
	require.Len(t, rejected, 1)
	require.True(t, errors.Is(rejected[bad.Key], pgstore.ErrRejected), rejected[bad.Key])
	require.EqualValues(t, wantWrites, histogramCount(t, p.m.upsertTime), "statements")
	require.EqualValues(t, 1, histogramCount(t, p.m.writeTime))

	n, err := cursors.NewPostgres(s.Store).Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 199, n)
}

// A window's rows go out in statements of StatementRows; one writer or
// four write the same rows.
func TestStatementsOfAWindow(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	rows := sortedStates(50, "w")
	p := newWriter(s.Store, 1)
	written, rejected, err := p.write(context.Background(), rows)
	require.NoError(t, err)
	require.Equal(t, 50, written)
	require.Empty(t, rejected)
	require.EqualValues(t, 1, histogramCount(t, p.m.upsertTime), "one statement for 50 rows")

	p4 := newWriter(s.Store, 4)
	p4.cfg.StatementRows = 10
	more := sortedStates(50, "x")
	_, _, err = p4.write(context.Background(), more)
	require.NoError(t, err)
	require.EqualValues(t, 5, histogramCount(t, p4.m.upsertTime), "five statements of ten")
	n, err := cursors.NewPostgres(s.Store).Count(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 100, n)
}

// The written cache lets only rows that can advance Postgres through, and
// remembers only what was written.
func TestWrittenSkipsRowsThatCannotAdvance(t *testing.T) {
	t.Parallel()
	w := newWritten(100)
	k := receipt.Key{User: "u", Channel: "c"}
	at := func(read, delivered int64) receipt.State {
		return receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: read}}, Delivered: receipt.Cursor{Position: receipt.Position{Seq: delivered}}}
	}
	require.Len(t, w.filter([]receipt.State{at(5, 5)}), 1, "nothing known: write it")
	w.remember([]receipt.State{at(5, 7)})
	require.Empty(t, w.filter([]receipt.State{at(5, 5)}), "not ahead on either cursor")
	require.Empty(t, w.filter([]receipt.State{at(3, 7)}))
	require.Len(t, w.filter([]receipt.State{at(6, 6)}), 1, "read ahead")
	require.Len(t, w.filter([]receipt.State{at(4, 8)}), 1, "delivered ahead")
	epoch := at(1, 1)
	epoch.Read.Position.Epoch = 1
	require.Len(t, w.filter([]receipt.State{epoch}), 1, "a new epoch is ahead")
	w.remember([]receipt.State{at(2, 2)})
	require.Empty(t, w.filter([]receipt.State{at(5, 7)}), "remembering a lower value keeps the max")
	priv := at(5, 7)
	priv.PrivateRead = receipt.Cursor{Position: receipt.Position{Seq: 9}}
	require.Len(t, w.filter([]receipt.State{priv}), 1, "a private read ahead can still advance a row")
	w.remember([]receipt.State{priv})
	require.Empty(t, w.filter([]receipt.State{priv}))
	priv.PrivateRead.Position = receipt.Position{Epoch: 1}
	require.Len(t, w.filter([]receipt.State{priv}), 1, "a private read at a new epoch is ahead")

	// Bounded: past capacity a tenth more than the excess is forgotten.
	for i := range 150 {
		w.remember([]receipt.State{{Key: receipt.Key{User: fmt.Sprint(i), Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}}})
	}
	require.LessOrEqual(t, w.len(), 100)
	off := newWritten(-1)
	off.remember([]receipt.State{at(9, 9)})
	require.Len(t, off.filter([]receipt.State{at(1, 1)}), 1, "disabled: everything is written")
}

// Bulk statements COPY the keys this replica never wrote without asking
// Postgres; a key that another writer gave a row fails the guess, the
// statement is merged by the upsert (the same max-register), and bulk
// statements ask first for a while.
func TestBulkStatementsGuessFreshKeysAndAskAfterAMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t)
	p := newWriter(s.Store, 1)
	p.cfg.StatementRows = 2 * stagedMinRows
	advance := func(rows []receipt.State, by int64) []receipt.State {
		out := slices.Clone(rows)
		for i := range out {
			out[i] = writeState(out[i].Key.User, out[i].Key.Channel, out[i].Read.Position.Seq+by)
		}
		return out
	}
	requireSeqs := func(rows []receipt.State) {
		t.Helper()
		for _, r := range rows {
			got, err := cursors.NewPostgres(s.Store).Get(ctx, r.Key.User, []string{r.Key.Channel})
			require.NoError(t, err)
			require.Len(t, got, 1, "%v", r.Key)
			require.Equal(t, r.Read.Position.Seq, got[0].Read.Position.Seq, "%v", r.Key)
		}
	}

	fresh := sortedStates(stagedMinRows+200, "g")
	n, rejected, err := p.write(ctx, fresh)
	require.NoError(t, err)
	require.Empty(t, rejected)
	require.Equal(t, len(fresh), n)
	require.Zero(t, counterValue(t, p.m.bulkGuessMissed), "fresh keys: the guess holds")
	require.Zero(t, p.askRowsUntil.Load())

	// Keys it wrote go to the upsert: advanced, no miss.
	again := advance(fresh, 10)
	_, _, err = p.write(ctx, again)
	require.NoError(t, err)
	require.Zero(t, counterValue(t, p.m.bulkGuessMissed))
	requireSeqs(again)

	// Another writer's rows, unknown to this replica: the guess misses and
	// the statement is still a max-merge (stale rows stay behind).
	other := sortedStates(stagedMinRows+100, "h")
	_, err = cursors.NewPostgres(s.Store).Upsert(ctx, advance(other, 5))
	require.NoError(t, err)
	mixed := append(slices.Clone(other), advance(sortedStates(50, "i"), 0)...) // stale for h, new for i
	slices.SortFunc(mixed, receipt.CompareStates)
	n, rejected, err = p.write(ctx, mixed)
	require.NoError(t, err)
	require.Empty(t, rejected)
	require.Equal(t, len(mixed), n)
	require.EqualValues(t, 1, counterValue(t, p.m.bulkGuessMissed))
	require.Greater(t, p.askRowsUntil.Load(), time.Now().UnixNano(), "bulk statements ask first for a while")
	requireSeqs(advance(other, 5))
	requireSeqs(sortedStates(50, "i"))

	// While asking, unknown keys with rows cost no miss.
	more := sortedStates(stagedMinRows+100, "j")
	_, err = cursors.NewPostgres(s.Store).Upsert(ctx, more)
	require.NoError(t, err)
	_, _, err = p.write(ctx, advance(more, 1))
	require.NoError(t, err)
	require.EqualValues(t, 1, counterValue(t, p.m.bulkGuessMissed))
	requireSeqs(advance(more, 1))
}
