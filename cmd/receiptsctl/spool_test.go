package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/spool"
)

// An orphaned spool directory (a gateway's, left behind) is sent to the
// topic in order, and the spool is empty after.
func TestSpoolReplaySendsAnOrphanedSpool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sp, err := spool.Open(spool.Config{Dir: dir, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 10})
	require.NoError(t, err)
	want := []string{"u1:c", "u2:c", "u3:c"}
	for _, k := range want {
		require.NoError(t, sp.Append(spool.Record{Key: []byte(k), Value: []byte("v-" + k)}))
	}
	require.NoError(t, sp.Close())

	b := kafkatest.New(t)
	var out bytes.Buffer
	args := []string{"replay", "--dir", dir, "--brokers", b.Seeds[0], "--topic", b.Topic, "--timeout", "30s"}
	require.NoError(t, runSpool(context.Background(), args, &out))
	require.Contains(t, out.String(), "empty")

	cl := b.Client(t, kgo.ConsumeTopics(b.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(got) < len(want) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)] = string(r.Value) })
	}
	for _, k := range want {
		require.Equal(t, "v-"+k, got[k])
	}

	// Nothing is left: a second replay sends nothing and says so.
	out.Reset()
	require.NoError(t, runSpool(context.Background(), args, &out))
	sp, err = spool.Open(spool.Config{Dir: dir, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 10})
	require.NoError(t, err)
	require.Zero(t, sp.Stats().Records)
	require.NoError(t, sp.Close())
}
