package kinds_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/repair"
)

// counter is a throwaway kind of state, defined only here: a max-register
// of a number per (user, channel), carried in a record payload of a type
// of its own (counterPayload, which pkg/event does not know), kept in a
// table of its own and in a Redis hash per user. The persister, the drift
// sweep and dead-letter repair handle it with no change of theirs: it is
// handed to them in their Kinds, as a new kind's file would add it to
// kinds.All.
type counter struct {
	Key receipt.Key
	N   int64
}

// counterPayload is the counter's payload type: its message is one varint
// field, the number.
const counterPayload event.PayloadType = 1000

var counterCodec = &kind.Payload[counter]{
	Type: counterPayload,
	Encode: func(c counter) (event.RecordEnvelope, []byte, error) {
		return event.RecordEnvelope{User: c.Key.User, Channel: c.Key.Channel, AcceptedAtUnixMs: 1},
			protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(c.N)), nil
	},
	Decode: func(e event.RecordEnvelope, b []byte) (counter, error) {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.VarintType {
			return counter{}, fmt.Errorf("not a counter")
		}
		v, m := protowire.ConsumeVarint(b[n:])
		if m < 0 || v > 1<<53 || e.User == "" || e.Channel == "" {
			return counter{}, fmt.Errorf("not a counter")
		}
		return counter{Key: receipt.Key{User: e.User, Channel: e.Channel}, N: int64(v)}, nil
	},
}

func counterRecord(k receipt.Key, n int64) *kgo.Record {
	r, err := kind.Record(&kind.Spec[receipt.Key, counter]{Name: "test_counters", Payload: counterCodec}, counter{Key: k, N: n})
	if err != nil {
		panic(err)
	}
	return r
}

var counterMax = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0`)

func counterKind() kind.Kind {
	hash := func(env *kind.Env, user string) string { return env.Redis.Prefix() + "tc:{" + user + "}" }
	rows := func(ctx context.Context, env *kind.Env, sql string, args ...any) ([]counter, error) {
		r, err := env.Postgres.Pool().Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(r, func(row pgx.CollectableRow) (counter, error) {
			var c counter
			return c, row.Scan(&c.Key.User, &c.Key.Channel, &c.N)
		})
	}
	return kind.New(&kind.Spec[receipt.Key, counter]{
		Name:      "test_counters",
		Key:       func(c counter) receipt.Key { return c.Key },
		Compare:   func(a, b counter) int { return a.Key.Compare(b.Key) },
		RecordKey: receipt.Key.KafkaKey,
		User:      func(k receipt.Key) string { return k.User },
		Time:      func(counter) int64 { return 0 },
		Zero:      func(k receipt.Key) counter { return counter{Key: k} },
		Empty:     func(c counter) bool { return c.N == 0 },
		Merge: func(_ *kind.Env, a, b counter) counter {
			if a.Key == (receipt.Key{}) {
				a.Key = b.Key
			}
			a.N = max(a.N, b.N)
			return a
		},
		Same:    func(a, b counter) bool { return a.N == b.N },
		Payload: counterCodec,
		PGWrite: func(ctx context.Context, env *kind.Env, vals []counter) (int64, error) {
			var users, chs []string
			var ns []int64
			for _, c := range vals {
				users, chs, ns = append(users, c.Key.User), append(chs, c.Key.Channel), append(ns, c.N)
			}
			tag, err := env.Postgres.Pool().Exec(ctx, `INSERT INTO test_counters AS t (user_id, channel_id, n)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
ON CONFLICT (user_id, channel_id) DO UPDATE SET n = GREATEST(t.n, excluded.n)`, users, chs, ns)
			return tag.RowsAffected(), err
		},
		PGGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([]counter, error) {
			var users, chs []string
			for _, k := range keys {
				users, chs = append(users, k.User), append(chs, k.Channel)
			}
			return rows(ctx, env, `SELECT t.user_id, t.channel_id, t.n FROM test_counters t
JOIN unnest($1::text[], $2::text[]) AS k(u, c) ON t.user_id = k.u AND t.channel_id = k.c`, users, chs)
		},
		PGPage: func(ctx context.Context, env *kind.Env, after receipt.Key, _ bool, n int) ([]counter, error) {
			return rows(ctx, env, `SELECT user_id, channel_id, n FROM test_counters
WHERE (user_id, channel_id) > ($1, $2) ORDER BY user_id, channel_id LIMIT $3`, after.User, after.Channel, n)
		},
		RedisWrite: func(ctx context.Context, env *kind.Env, vals []counter) ([]error, error) {
			for _, c := range vals {
				if err := counterMax.Run(ctx, env.Redis.Client(), []string{hash(env, c.Key.User)}, c.Key.Channel, c.N).Err(); err != nil {
					return nil, err
				}
			}
			return nil, nil
		},
		RedisGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([][]*counter, error) {
			out := make([][]*counter, len(keys))
			for i, k := range keys {
				out[i] = []*counter{nil}
				n, err := env.Redis.Client().HGet(ctx, hash(env, k.User), k.Channel).Int64()
				switch {
				case err == redis.Nil:
				case err != nil:
					return nil, err
				default:
					out[i][0] = &counter{Key: k, N: n}
				}
			}
			return out, nil
		},
		RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[counter], error) {
			users, next, err := env.Redis.ScanTagged(ctx, "tc:", cur, count)
			page := kind.ScanPage[counter]{Next: next, Scanned: len(users)}
			if err != nil {
				return page, err
			}
			for _, u := range users {
				all, err := env.Redis.Client().HGetAll(ctx, hash(env, u)).Result()
				if err != nil {
					return page, err
				}
				for ch, v := range all {
					var n int64
					if _, err := fmt.Sscan(v, &n); err != nil {
						page.Invalid++
						continue
					}
					page.Values = append(page.Values, counter{Key: receipt.Key{User: u, Channel: ch}, N: n})
				}
			}
			return page, nil
		},
	})
}

// A kind defined in a test is persisted from the topic, swept both ways
// and repaired from a dead letter by the services as they are.
func TestThrowawayKindNeedsNoServiceChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	pg := schema.Store
	_, err := pg.Pool().Exec(ctx, `CREATE TABLE test_counters (user_id text, channel_id text, n bigint NOT NULL,
PRIMARY KEY (user_id, channel_id))`)
	require.NoError(t, err)
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	env := &kind.Env{Postgres: pg, Redis: rs}
	tc := counterKind()
	all := append(kinds.All(), tc)
	k := func(u, c string) receipt.Key { return receipt.Key{User: u, Channel: c} }
	stored := func(where string) map[receipt.Key]int64 {
		out := map[receipt.Key]int64{}
		var vals []any
		if where == "postgres" {
			vals, err = tc.PagePG(ctx, env, nil, 100)
			require.NoError(t, err)
		} else {
			// Every SCAN page: the Redis is shared with other tests.
			var cur redisstore.ScanCursor
			for {
				page, err := tc.ScanRedis(ctx, env, cur, 1000)
				require.NoError(t, err)
				vals = append(vals, page.Values...)
				if cur = page.Next; cur.Done() {
					break
				}
			}
		}
		for _, v := range vals {
			out[v.(counter).Key] = v.(counter).N
		}
		return out
	}

	// The persister folds the window (5 then 3: the max) and writes it.
	broker := kafkatest.New(t)
	cl := broker.Client(t)
	for _, r := range []*kgo.Record{counterRecord(k("u1", "c"), 5), counterRecord(k("u1", "c"), 3), counterRecord(k("u2", "c"), 7)} {
		r.Topic = broker.Topic
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	p, err := persister.New(persister.Config{
		Kafka: kafkaconf.Config{Brokers: broker.Seeds}, KafkaOpts: kafkatest.FastClientOpts(broker.Seeds),
		Topic: broker.Topic, DLTTopic: broker.DLTTopic, Group: broker.Group,
		Postgres: pgstore.Config{URL: pgtest.URL(), Schema: schema.Name, MaxConns: 4},
		Retry:    backoff.Config{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Kinds: all,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done); p.Close() })
	want := map[receipt.Key]int64{k("u1", "c"): 5, k("u2", "c"): 7}
	require.Eventually(t, func() bool { return fmt.Sprint(stored("postgres")) == fmt.Sprint(want) }, 20*time.Second, 20*time.Millisecond)

	// The sweep copies Postgres' rows into Redis and Redis' own into
	// Postgres, counting them under the kind's name.
	require.NoError(t, rdb.HSet(ctx, rs.Prefix()+"tc:{u3}", "d", 9).Err())
	// A dry run finds the same and repairs nothing.
	check, err := drift.New(drift.Config{Postgres: pg, Redis: rs, Grace: -1, Kinds: all, DryRun: true})
	require.NoError(t, err)
	rep, err := check.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisMissing: 2, PostgresMissing: 1}, *rep.ByKind["test_counters"])
	require.Zero(t, rep.Repaired.Total())
	require.Len(t, stored("postgres"), 2)
	sw, err := drift.New(drift.Config{Postgres: pg, Redis: rs, Grace: -1, Kinds: all})
	require.NoError(t, err)
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisMissing: 2, PostgresMissing: 1}, *rep.ByKind["test_counters"])
	want[k("u3", "d")] = 9
	require.Equal(t, want, stored("postgres"))
	require.Equal(t, want, stored("redis"))

	// A dead letter is repaired into both stores by the merge rule.
	rp := &repair.Repairer{Postgres: pg, Redis: rs, Kinds: all}
	for _, n := range []int64{11, 2} {
		d, err := rp.Decode(counterRecord(k("u1", "c"), n))
		require.NoError(t, err)
		require.NoError(t, rp.RepairDecoded(ctx, d))
	}
	want[k("u1", "c")] = 11
	require.Equal(t, want, stored("postgres"))
	require.Equal(t, want, stored("redis"))

	// Both stores agree: a dry run finds nothing in any kind.
	rep, err = check.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Found.Total(), "%+v", rep.ByKind)
}

// A kind's own payload is decoded by its kind (kind.DecodeRecord): one it
// refuses, or one of a type no kind of the list has, makes the record
// undecodable with the reason (the persister dead-letters it), and
// pkg/event alone keeps it undecoded.
func TestKindPayloadDecode(t *testing.T) {
	t.Parallel()
	all := append(kinds.All(), counterKind())
	rec := counterRecord(receipt.Key{User: "u1", Channel: "c"}, 4)
	d, err := kind.DecodeRecord(all, rec)
	require.NoError(t, err)
	require.Len(t, d.Payloads, 1)
	require.Equal(t, counter{Key: receipt.Key{User: "u1", Channel: "c"}, N: 4}, d.Payloads[0].Value)
	v, ok := counterKind().FromEvent(&d)
	require.True(t, ok)
	require.Equal(t, int64(4), v.(counter).N)
	for _, k := range kinds.All() {
		_, ok := k.FromEvent(&d)
		require.False(t, ok, "%s takes no counter", k.Name())
	}

	_, err = kind.DecodeRecord(kinds.All(), rec)
	require.ErrorIs(t, err, event.ErrUndecodable)
	require.ErrorContains(t, err, "no kind's")
	plain, err := event.DecodeRecord(rec)
	require.NoError(t, err, "the envelope alone decodes")
	require.Nil(t, plain.Payloads[0].Value)

	bad, err := event.EncodeEnvelope(event.RecordEnvelope{User: "u1", Channel: "c"}, event.Payload{Type: counterPayload, Bytes: []byte{0x12, 0x00}})
	require.NoError(t, err)
	_, err = kind.DecodeRecord(all, bad)
	require.ErrorIs(t, err, event.ErrUndecodable)
	require.ErrorContains(t, err, "invalid test_counters payload")
}

// No two kinds share a payload type, and none takes a type pkg/event
// decodes itself.
func TestPayloadTypesUnique(t *testing.T) {
	t.Parallel()
	seen := map[event.PayloadType]string{}
	for _, k := range append(kinds.All(), counterKind()) {
		typ, ok := k.PayloadType()
		if !ok {
			continue
		}
		require.False(t, event.BuiltinPayload(typ), "%s takes %s", k.Name(), typ)
		require.NotContains(t, seen, typ, "%s and %s", k.Name(), seen[typ])
		seen[typ] = k.Name()
	}
	require.NotEmpty(t, seen)
}
