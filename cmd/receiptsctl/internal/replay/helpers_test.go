package replay_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// bundle is one test's isolated stores: a Postgres schema and a Redis
// key prefix.
type bundle struct {
	schema *pgtest.Schema
	pg     *pgstore.Store
	rs     *redisstore.Store
	reg    *prometheus.Registry
}

func setup(t *testing.T) *bundle {
	t.Helper()
	schema := pgtest.NewSchema(t)
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(context.Background()))
	return &bundle{schema: schema, pg: schema.Store, rs: rs, reg: prometheus.NewRegistry()}
}

// state builds a state with read (and so delivered) at seq, or only
// delivered when read is false. UpdatedAtUnixMs is old, outside any grace.
func state(user, ch string, seq int64, read bool) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + itoa(seq)}
	s := receipt.State{Key: receipt.Key{User: user, Channel: ch}, Delivered: c, DeviceID: "dev", UpdatedAtUnixMs: 1000}
	if read {
		s.Read = c
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// dltRecord wraps a value in a dead letter as the persister would send it,
// on partition 0 of the dead-letter topic.
func dltRecord(b *kafkatest.Broker, key, value []byte, srcPartition int32, srcOffset int64, reason string) *kgo.Record {
	src := &kgo.Record{Topic: b.Topic, Partition: srcPartition, Offset: srcOffset, Key: key, Value: value}
	r := event.DeadLetter(src, b.DLTTopic, reason)
	r.Partition = 0
	return r
}

func encode(t *testing.T, s receipt.State) *kgo.Record {
	t.Helper()
	r, err := event.Encode(s)
	require.NoError(t, err)
	return r
}

// pgState reads one key from Postgres; ok is false when there is no row.
func pgState(t *testing.T, pg *pgstore.Store, k receipt.Key) (receipt.State, bool) {
	t.Helper()
	rows, err := cursors.NewPostgres(pg).Get(context.Background(), k.User, []string{k.Channel})
	require.NoError(t, err)
	if len(rows) == 0 {
		return receipt.State{}, false
	}
	return rows[0], true
}
