package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/kafkatest"
)

func TestLagCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kafkatest.New(t)
	cl := b.Client(t, kgo.DefaultProduceTopic(b.Topic))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())

	args := []string{"--brokers", b.Seeds[0], "--group", b.Group, "--topic", b.Topic}
	require.NoError(t, runLag(ctx, args))
	// One record never consumed: waiting for lag 0 fails with exit status 3.
	err := runLag(ctx, append(args, "--wait-zero", "300ms"))
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 3, ee.code)
}

func TestLoadRejectsBadFlags(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, runLoad(context.Background(), []string{"--read-share", "2"}), "read-share")
	require.ErrorContains(t, runLoad(context.Background(), []string{"--zipf", "0.5", "--quiet"}), "zipf")
}

func TestDispatchUnknownCommand(t *testing.T) {
	t.Parallel()
	var ee *exitError
	require.ErrorAs(t, dispatch(context.Background(), []string{"nope"}), &ee)
	require.Equal(t, 2, ee.code)
}

func TestDispatchPointsBenchmarksToReceiptsbench(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"http-floor", "notices", "unread-bench", "readby-bench", "movelog-bench"} {
		var ee *exitError
		err := dispatch(context.Background(), []string{cmd})
		require.ErrorAs(t, err, &ee, cmd)
		require.Equal(t, 2, ee.code)
		require.ErrorContains(t, err, "receiptsbench "+cmd)
	}
}
