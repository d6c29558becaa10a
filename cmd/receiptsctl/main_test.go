package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

func state(user, ch string, read, deliv int64) receipt.State {
	return receipt.State{
		Key:       receipt.Key{User: user, Channel: ch},
		Read:      receipt.Cursor{Position: receipt.Position{Seq: read}, MessageID: "m"},
		Delivered: receipt.Cursor{Position: receipt.Position{Seq: max(read, deliv)}, MessageID: "m"},
		DeviceID:  "d1", UpdatedAtUnixMs: 1,
	}
}

func TestCompareStates(t *testing.T) {
	t.Parallel()
	rows := compareStates(
		[]receipt.State{state("u", "same", 5, 5), state("u", "rahead", 7, 7), state("u", "ronly", 1, 1), state("u", "div", 9, 9)},
		[]receipt.State{state("u", "same", 5, 5), state("u", "rahead", 6, 6), state("u", "ponly", 2, 2), state("u", "div", 3, 12)},
	)
	got := map[string]string{}
	for _, r := range rows {
		got[r.Channel] = r.Verdict
	}
	require.Equal(t, map[string]string{
		"same": "same", "rahead": "redis ahead", "ronly": "redis only", "ponly": "postgres only", "div": "diverged",
	}, got)
	require.Equal(t, "div", rows[0].Channel, "rows are in channel order")
	require.Equal(t, "e2.7 (m)", cursorText(&receipt.State{Read: receipt.Cursor{Position: receipt.Position{Epoch: 2, Seq: 7}, MessageID: "m"}}, true))
	require.Equal(t, "-", cursorText(nil, true))
}

func TestInspectReadsBothStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: prefix})

	_, err := cursors.NewPostgres(schema.Store).Upsert(ctx, []receipt.State{state("alice", "c1", 5, 5), state("alice", "c2", 3, 3)})
	require.NoError(t, err)
	_, err = cursors.NewStore(rs).Merge(ctx, []receipt.State{state("alice", "c1", 8, 8), state("alice", "c2", 3, 3)})
	require.NoError(t, err)

	args := []string{"--user", "alice", "--pg-url", schema.URL, "--redis-url", redistest.URL(), "--redis-prefix", prefix}
	var out bytes.Buffer
	require.NoError(t, runInspect(ctx, append(args, "--json"), &out))
	var doc struct {
		Channels []inspectRow
		Redis    struct{ Complete *bool }
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Len(t, doc.Channels, 2)
	require.Equal(t, "redis ahead", doc.Channels[0].Verdict)
	require.EqualValues(t, 8, doc.Channels[0].Redis.Read.Position.Seq)
	require.EqualValues(t, 5, doc.Channels[0].Postgres.Read.Position.Seq)
	require.Equal(t, "same", doc.Channels[1].Verdict)
	require.NotNil(t, doc.Redis.Complete)

	out.Reset()
	require.NoError(t, runInspect(ctx, append(args, "--channel", "c2"), &out))
	require.Contains(t, out.String(), "same")
	require.NotContains(t, out.String(), "c1")

	require.Error(t, runInspect(ctx, []string{"--user", "a b"}, &out), "ids are validated")
}
