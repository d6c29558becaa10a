package drift_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

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

// metric reads one counter or gauge from the registry; labels are
// name/value pairs. Missing series read as 0.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
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

// redisState reads one key from Redis; ok is false when the field is
// missing.
func redisState(t *testing.T, rs *redisstore.Store, k receipt.Key) (receipt.State, bool) {
	t.Helper()
	sts, _, err := cursors.NewStore(rs).Get(context.Background(), k.User, []string{k.Channel})
	require.NoError(t, err)
	if len(sts) == 0 {
		return receipt.State{}, false
	}
	return sts[0], true
}
