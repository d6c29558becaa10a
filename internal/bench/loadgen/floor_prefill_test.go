package loadgen_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/internal/bench/loadgen"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// The floor server answers the load tool like the gateway does, on the
// batch route and the single-mark routes: every event is acked.
func TestFloorServerAcksEveryEvent(t *testing.T) {
	srv := httptest.NewServer(loadgen.FloorHandler())
	t.Cleanup(srv.Close)
	for _, single := range []bool{false, true} {
		t.Run("single="+strconv.FormatBool(single), func(t *testing.T) {
			cfg := loadgen.Config{Target: srv.URL, Events: 500, Batch: 50, Single: single, Concurrency: 4}
			if single {
				cfg.Batch = 1
			}
			res, err := loadgen.Run(context.Background(), cfg)
			require.NoError(t, err)
			require.Zero(t, res.ErrorCount())
			require.EqualValues(t, 500, res.AckedEvents)
		})
	}
}

// Prefill writes users x channels states with the gateway's layout: each
// is readable through the store, and a second prefill writes nothing new.
func TestPrefillWritesEveryState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redistest.Client(t)
	store := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, store.Load(ctx))
	var mu sync.Mutex
	also := map[receipt.Key]receipt.State{}
	cfg := loadgen.PrefillConfig{Users: 301, Channels: 3, UserPrefix: "pf", Batch: 64, Workers: 3,
		Also: func(_ context.Context, states []receipt.State) error {
			mu.Lock()
			defer mu.Unlock()
			for _, st := range states {
				also[st.Key] = st
			}
			return nil
		}}
	res, err := loadgen.Prefill(ctx, store, cfg)
	require.NoError(t, err)
	require.EqualValues(t, 903, res.States)
	require.Len(t, also, 903, "every state is handed to Also (e.g. Postgres) too")
	for _, u := range []int{0, 150, 300} {
		states, _, err := cursors.NewStore(store).Get(ctx, "pf"+strconv.Itoa(u), []string{"c0", "c1", "c2"})
		require.NoError(t, err)
		require.Len(t, states, 3)
		for _, st := range states {
			require.Positive(t, st.Read.Position.Seq, "user %d channel %s", u, st.Key.Channel)
			require.Equal(t, st.Read.Position, st.Delivered.Position)
			require.True(t, st.SameCursors(also[st.Key]), "Redis and Also got the same state of %s", st.Key.KafkaKey())
		}
	}
	keys, err := rdb.Keys(ctx, store.Prefix()+"u:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 301)

	_, err = loadgen.Prefill(ctx, store, loadgen.PrefillConfig{Users: 0, Channels: 1, UserPrefix: "pf"})
	require.Error(t, err)

	cfg.Also = func(context.Context, []receipt.State) error { return errors.New("postgres down") }
	_, err = loadgen.Prefill(ctx, store, cfg)
	require.ErrorContains(t, err, "postgres down", "a failure of Also fails the prefill")
}
