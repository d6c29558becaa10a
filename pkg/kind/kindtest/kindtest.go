// Package kindtest is the conformance suite every kind of state must
// pass, for the kinds' tests (only tests import it): its merge rule obeys
// the laws that let stores converge (MergeLaws), and the rule written in
// Go, in its SQL and in its Lua agrees on the same random histories
// (StoresAgree).
package kindtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// Redis is a Redis store under a key prefix of the test's own, with its
// scripts and scripts (a kind's) loaded: what a kind folder's tests write
// through.
func Redis(t testing.TB, scripts ...*redis.Script) *redisstore.Store {
	t.Helper()
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(context.Background(), scripts...))
	return rs
}

// Env is the test's own stores (a migrated schema, a Redis key prefix),
// as the suite writes a kind through them.
func Env(t testing.TB) *kind.Env {
	t.Helper()
	return &kind.Env{Postgres: pgtest.NewSchema(t).Store, Redis: Redis(t)}
}

// Gen draws a valid value of a kind, over a few keys so that values of
// one key meet (and, where the rule has ties, few values so that ties
// meet).
type Gen func(r *rand.Rand) any

// lawRounds is how many triples of values of one key MergeLaws checks.
const lawRounds = 500

// MergeLaws checks, on random values of one key from gen, that k's Merge
// is commutative, associative and idempotent and has Zero as identity,
// each as Same sees values: what lets stores that apply the same values
// in any order, any number of times, converge.
func MergeLaws(t testing.TB, k kind.Kind, env *kind.Env, gen Gen) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	merge := func(a, b any) any { return k.MergeValues(env, a, b) }
	for round := range lawRounds {
		a := gen(r)
		key := k.KeyOf(a)
		b, c := sameKey(r, k, gen, key), sameKey(r, k, gen, key)
		if b == nil || c == nil {
			continue // gen rarely meets this key
		}
		where := fmt.Sprintf("round %d: %+v, %+v, %+v", round, a, b, c)
		ab := merge(a, b)
		require.True(t, k.SameValues(ab, merge(b, a)), "not commutative: %s", where)
		require.True(t, k.SameValues(merge(ab, c), merge(a, merge(b, c))), "not associative: %s", where)
		require.True(t, k.SameValues(merge(ab, ab), ab), "not idempotent: %s", where)
		require.True(t, k.SameValues(merge(ab, b), ab), "merging a value again changed the merge: %s", where)
		require.True(t, k.SameValues(merge(k.ZeroOf(key), ab), ab), "zero is not the identity: %s", where)
	}
}

// sameKey draws values from gen until one has key (nil after a few
// tries).
func sameKey(r *rand.Rand, k kind.Kind, gen Gen, key any) any {
	for range 64 {
		if v := gen(r); k.KeyOf(v) == key {
			return v
		}
	}
	return nil
}

// StoresAgree checks that k's rule holds in Go (the domain floor), in
// Postgres (its SQL) and in Redis (its Lua) alike: the same random
// histories from gen, written in random batches through env's stores,
// leave each store holding the Go fold of each key's values, in every
// copy Redis keeps. env's stores are the test's own (a schema, a key
// prefix): between histories the kind's table (its Name) is emptied and
// the prefix's keys deleted.
func StoresAgree(t testing.TB, k kind.Kind, env *kind.Env, gen Gen) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Redis.Load(ctx, k.Scripts()...))
	for history := range 4 {
		r := rand.New(rand.NewPCG(uint64(history), 7))
		fold := map[any]any{}
		var keys []any
		for batch := range 20 {
			vals := make([]any, 1+r.IntN(6))
			for i := range vals {
				v := gen(r)
				vals[i] = v
				key := k.KeyOf(v)
				cur, ok := fold[key]
				if !ok {
					cur, keys = k.ZeroOf(key), append(keys, key)
				}
				fold[key] = k.MergeValues(env, cur, v)
			}
			_, err := k.WritePG(ctx, env, vals)
			require.NoError(t, err, "batch %d", batch)
			errs, err := k.WriteRedis(ctx, env, vals)
			require.NoError(t, err, "batch %d", batch)
			for _, e := range errs {
				require.NoError(t, e)
			}
		}
		rows, err := k.GetPG(ctx, env, keys)
		require.NoError(t, err)
		require.Len(t, rows, len(keys))
		for _, row := range rows {
			want := fold[k.KeyOf(row)]
			require.True(t, k.SameValues(want, row), "history %d: postgres holds %+v, the rule %+v", history, row, want)
		}
		held, err := k.GetRedis(ctx, env, keys)
		require.NoError(t, err)
		for i, copies := range held {
			for j, c := range copies {
				require.NotNil(t, c, "history %d: redis copy %d of %v", history, j, keys[i])
				require.True(t, k.SameValues(fold[keys[i]], c), "history %d: redis copy %d holds %+v, the rule %+v", history, j, c, fold[keys[i]])
			}
		}
		// The next history starts from empty stores.
		_, err = env.Postgres.Pool().Exec(ctx, "TRUNCATE "+k.Name())
		require.NoError(t, err)
		rdb, ok := env.Redis.Client().(*redis.Client)
		require.True(t, ok, "a test's single Redis (redistest.Client)")
		redistest.DeletePrefix(ctx, rdb, env.Redis.Prefix())
		require.NoError(t, env.Redis.Load(ctx, k.Scripts()...))
	}
}

// Replay is an order in which to apply n values: every one once, some
// again, shuffled (a topic redelivered out of order). A store that
// merges by its kind's rule ends where the Go fold does in any of them.
func Replay(rng *rand.Rand, n int) []int {
	order := rng.Perm(n)
	order = append(order, order[:rng.IntN(n+1)]...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}
