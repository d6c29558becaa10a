package grouplag_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkatest"
)

func TestFenceRoundTrip(t *testing.T) {
	t.Parallel()
	f := grouplag.Fence{0: 5, 3: 0, 1: 12}
	require.Equal(t, "0:5,1:12,3:0", f.String())
	back, err := grouplag.ParseFence(f.String())
	require.NoError(t, err)
	require.Equal(t, f, back)
	empty, err := grouplag.ParseFence("")
	require.NoError(t, err)
	require.Empty(t, empty)
	for _, bad := range []string{"x", "1:", ":2", "1:-2", "-1:2", "1:2,", "1:99999999999999999999"} {
		_, err := grouplag.ParseFence(bad)
		require.Error(t, err, bad)
	}
	require.True(t, f.PassedBy(map[int32]int64{0: 5, 1: 13, 3: 0}))
	require.False(t, f.PassedBy(map[int32]int64{0: 5, 1: 11}))
	require.EqualValues(t, 1, f.Behind(map[int32]int64{0: 5, 1: 11}))
}

// TestBarrier holds CatchUp to what the group committed: a fence taken
// after the call began is passed only once the group commits past every
// record produced before it, concurrent calls share one fence, a call
// that leaves stops waiting, and records still in a local spool keep the
// fence closed.
func TestBarrier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kafkatest.New(t)
	cl := b.Client(t, kgo.DefaultProduceTopic(b.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	var spooled atomic.Bool
	bar := grouplag.NewBarrier(grouplag.BarrierConfig{Admin: adm, Group: b.Group, Topic: b.Topic, Poll: 5 * time.Millisecond, Pending: spooled.Load})

	// Nothing produced: passed at once.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, bar.CatchUp(cctx))
	cancel()

	for i := range 6 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: int32(i % 3)}).FirstErr())
	}
	f, err := bar.Mark(ctx)
	require.NoError(t, err)
	ok, err := bar.Passed(ctx, f)
	require.NoError(t, err)
	require.False(t, ok, "nothing is committed yet")

	// Eight concurrent callers wait; none returns before the commit.
	var wg sync.WaitGroup
	var returned atomic.Int32
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			errs <- bar.CatchUp(cctx)
			returned.Add(1)
		})
	}
	// A caller that gives up is answered with its context's error.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	require.ErrorIs(t, bar.CatchUp(short), context.DeadlineExceeded)
	cancel()
	require.Zero(t, returned.Load(), "a caller returned before the group committed")

	// A partial commit is not enough.
	partial := kadm.Offsets{}
	partial.AddOffset(b.Topic, 0, f[0], -1)
	resp, err := adm.CommitOffsets(ctx, b.Group, partial)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	ok, err = bar.Passed(ctx, f)
	require.NoError(t, err)
	require.False(t, ok)

	// Committing the rest answers every caller.
	all := kadm.Offsets{}
	for p, o := range f {
		all.AddOffset(b.Topic, p, o, -1)
	}
	resp, err = adm.CommitOffsets(ctx, b.Group, all)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Passed from what was seen, even once the group rewinds.
	rewind := kadm.Offsets{}
	rewind.AddOffset(b.Topic, 0, 0, -1)
	resp, err = adm.CommitOffsets(ctx, b.Group, rewind)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	ok, err = bar.Passed(ctx, f)
	require.NoError(t, err)
	require.True(t, ok)

	// Records in a local spool keep it closed.
	spooled.Store(true)
	ok, err = bar.Passed(ctx, f)
	require.NoError(t, err)
	require.False(t, ok)
	spooled.Store(false)
}
