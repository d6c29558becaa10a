package kindtest_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// peak is a max-register of a number per key, kept in the table peaks
// and a Redis hash; plantMin makes its Redis side keep the least (a rule
// written wrong in one store), plantMerge its Go rule keep the last.
type peak struct {
	Key string
	N   int64
}

func peakKind(plantMin, plantMerge bool) kind.Kind {
	hash := func(env *kind.Env) string { return env.Redis.Prefix() + "peaks" }
	return kind.New(&kind.Spec[string, peak]{
		Name:      "peaks",
		Key:       func(p peak) string { return p.Key },
		Compare:   func(a, b peak) int { return strings.Compare(a.Key, b.Key) },
		RecordKey: func(k string) string { return k },
		Time:      func(peak) int64 { return 0 },
		Zero:      func(k string) peak { return peak{Key: k} },
		Empty:     func(p peak) bool { return p.N == 0 },
		Merge: func(_ *kind.Env, a, b peak) peak {
			if plantMerge {
				return b
			}
			return peak{Key: b.Key, N: max(a.N, b.N)}
		},
		Same: func(a, b peak) bool { return a.N == b.N },
		PGWrite: func(ctx context.Context, env *kind.Env, vals []peak) (int64, error) {
			var ks []string
			var ns []int64
			for _, p := range vals {
				ks, ns = append(ks, p.Key), append(ns, p.N)
			}
			tag, err := env.Postgres.Pool().Exec(ctx, `INSERT INTO peaks AS t (k, n) SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (k) DO UPDATE SET n = GREATEST(t.n, excluded.n)`, ks, ns)
			return tag.RowsAffected(), err
		},
		PGGet: func(ctx context.Context, env *kind.Env, keys []string) ([]peak, error) {
			rows, err := env.Postgres.Pool().Query(ctx, `SELECT k, n FROM peaks WHERE k = ANY($1)`, keys)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(row pgx.CollectableRow) (peak, error) {
				var p peak
				return p, row.Scan(&p.Key, &p.N)
			})
		},
		RedisWrite: func(ctx context.Context, env *kind.Env, vals []peak) ([]error, error) {
			for _, p := range vals {
				cur, err := env.Redis.Client().HGet(ctx, hash(env), p.Key).Int64()
				if err != nil && err != redis.Nil {
					return nil, err
				}
				keep := err == redis.Nil || (plantMin && p.N < cur) || (!plantMin && p.N > cur)
				if keep {
					if err := env.Redis.Client().HSet(ctx, hash(env), p.Key, p.N).Err(); err != nil {
						return nil, err
					}
				}
			}
			return nil, nil
		},
		RedisGet: func(ctx context.Context, env *kind.Env, keys []string) ([][]*peak, error) {
			out := make([][]*peak, len(keys))
			for i, k := range keys {
				out[i] = []*peak{nil}
				n, err := env.Redis.Client().HGet(ctx, hash(env), k).Int64()
				if err == nil {
					out[i][0] = &peak{Key: k, N: n}
				} else if err != redis.Nil {
					return nil, err
				}
			}
			return out, nil
		},
	})
}

func genPeak(r *rand.Rand) any { return peak{Key: "k" + strconv.Itoa(r.IntN(3)), N: 1 + r.Int64N(20)} }

func peakEnv(t *testing.T) *kind.Env {
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	_, err := pg.Pool().Exec(ctx, `CREATE TABLE peaks (k text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(t, err)
	rdb := redistest.Client(t)
	return &kind.Env{Postgres: pg, Redis: redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})}
}

// failed reports whether check failed t (its failures are recorded, not
// reported: the check is meant to fail).
func failed(t *testing.T, check func(testing.TB)) bool {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.failed
}

// recorder records the failures of a check (require calls Errorf, then
// FailNow), ending the check's goroutine as a failed test would.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; runtime.Goexit() }
func (r *recorder) Failed() bool          { return r.failed }

// The suite passes a kind whose stores agree with its lawful rule, and
// fails one whose Redis side keeps the least (a planted divergence) and
// one whose rule keeps the last value (not commutative).
func TestSuiteCatchesPlantedFaults(t *testing.T) {
	t.Parallel()
	env := peakEnv(t)
	good := peakKind(false, false)
	require.False(t, failed(t, func(tb testing.TB) { kindtest.MergeLaws(tb, good, env, genPeak) }), "a lawful rule")
	require.False(t, failed(t, func(tb testing.TB) { kindtest.StoresAgree(tb, good, env, genPeak) }), "stores that agree")
	require.True(t, failed(t, func(tb testing.TB) { kindtest.StoresAgree(tb, peakKind(true, false), env, genPeak) }), "redis keeps the least")
	require.True(t, failed(t, func(tb testing.TB) { kindtest.MergeLaws(tb, peakKind(false, true), env, genPeak) }), "last write wins")
}
