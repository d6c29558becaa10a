package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
)

// Defaults.
const (
	AddrDefault   = "127.0.0.1:6379"
	PrefixDefault = "receipts:"
	// loadedField marks a hash hydrated from Postgres; it contains ':' so no
	// channel id can collide with it.
	loadedField = ":loaded"
	// hydrateChunk bounds one hydrate script call.
	hydrateChunk = 256
)

// ErrUnavailable wraps every Redis failure: the caller treats the real-time
// view as degraded and relies on the durable path and the repairs.
var ErrUnavailable = errors.New("redis unavailable")

// Config configures a Store.
type Config struct {
	// Prefix starts every key. Defaults to PrefixDefault.
	Prefix string
}

// Store is the Redis side of the receipts state.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

// New wraps a go-redis client (single node or cluster).
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = PrefixDefault
	}
	return &Store{rdb: rdb, prefix: cfg.Prefix}
}

// Client returns the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix returns the key prefix.
func (s *Store) Prefix() string { return s.prefix }

// UserKey is the hash holding all of a user's channels. The {user} hash tag
// keeps a user's keys in one Redis Cluster slot.
func (s *Store) UserKey(user string) string { return s.prefix + "u:{" + user + "}" }

// userFromKey inverts UserKey.
func (s *Store) userFromKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"u:{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}

// Load registers the scripts so that EVALSHA finds them (go-redis also falls
// back to EVAL on NOSCRIPT, e.g. after a Redis restart).
func (s *Store) Load(ctx context.Context) error {
	for _, sc := range []*redis.Script{mergeScript, hydrateScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("%w: loading script: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// Ping checks Redis.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func args(st receipt.State) []any {
	return []any{st.Key.Channel,
		st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID,
		st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID,
		st.DeviceID, st.UpdatedAtUnixMs}
}

// MergeResult is the outcome of one merge.
type MergeResult struct {
	State    receipt.State
	Advanced bool
	Err      error
}

// Merge max-merges states in one pipeline (one round trip for a batch) and
// returns, per state, the merged value and whether it advanced anything.
// err is set when the pipeline as a whole failed.
func (s *Store) Merge(ctx context.Context, states []receipt.State) ([]MergeResult, error) {
	out := make([]MergeResult, len(states))
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(states))
	for i, st := range states {
		cmds[i] = mergeScript.EvalSha(ctx, pipe, []string{s.UserKey(st.Key.User)}, args(st)...)
	}
	_, err := pipe.Exec(ctx)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its script cache (restart, SCRIPT FLUSH): load, redo.
		if lerr := s.Load(ctx); lerr != nil {
			return nil, lerr
		}
		return s.Merge(ctx, states)
	}
	for i, cmd := range cmds {
		out[i].State.Key = states[i].Key
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: merging %s: %w", ErrUnavailable, states[i].Key.KafkaKey(), cerr)
			continue
		}
		changed, _ := res[0].(int64)
		val, _ := res[1].(string)
		st, perr := parseValue(states[i].Key, val)
		if perr != nil {
			out[i].Err = perr
			continue
		}
		out[i].State, out[i].Advanced = st, changed == 1
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// Get returns a user's states for the listed channels (all when empty) and
// whether the hash is complete, i.e. hydrated from Postgres since it was
// last lost. A missing field in a complete hash means "no state".
func (s *Store) Get(ctx context.Context, user string, channels []string) (states []receipt.State, complete bool, err error) {
	key := s.UserKey(user)
	if len(channels) == 0 {
		m, err := s.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		_, complete = m[loadedField]
		for field, val := range m {
			if field == loadedField {
				continue
			}
			st, err := parseValue(receipt.Key{User: user, Channel: field}, val)
			if err != nil {
				return nil, false, err
			}
			states = append(states, st)
		}
		return states, complete, nil
	}
	vals, err := s.rdb.HMGet(ctx, key, append([]string{loadedField}, channels...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	complete = vals[0] != nil
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		st, err := parseValue(receipt.Key{User: user, Channel: channels[i]}, str)
		if err != nil {
			return nil, false, err
		}
		states = append(states, st)
	}
	return states, complete, nil
}

// Hydrate max-merges a user's durable states into the hash and marks it
// complete. Concurrent writes are safe: every value goes through the merge.
func (s *Store) Hydrate(ctx context.Context, user string, states []receipt.State) error {
	key := s.UserKey(user)
	for start := 0; ; start += hydrateChunk {
		end := min(start+hydrateChunk, len(states))
		argv := make([]any, 0, (end-start)*9)
		for _, st := range states[start:end] {
			argv = append(argv, args(st)...)
		}
		// Only the last chunk sets the marker; earlier chunks merge only.
		sc := hydrateScript
		if end < len(states) {
			sc = mergeManyScript
		}
		if err := sc.Run(ctx, s.rdb, []string{key}, argv...).Err(); err != nil {
			return fmt.Errorf("%w: hydrating %s: %w", ErrUnavailable, user, err)
		}
		if end == len(states) {
			return nil
		}
	}
}

// mergeManyScript is hydrateScript without the completeness marker.
var mergeManyScript = redis.NewScript(luaCommon + `
for i = 1, #ARGV, 9 do
  merge(KEYS[1], ARGV[i], {re=ARGV[i+1], rs=ARGV[i+2], rm=ARGV[i+3], de=ARGV[i+4], ds=ARGV[i+5], dm=ARGV[i+6], dev=ARGV[i+7], ts=ARGV[i+8]})
end
return 1
`)

// ScanUsers returns one bounded page of user ids (SCAN over the prefix) and
// the cursor for the next page (0 when done): the drift sweep's walk.
func (s *Store) ScanUsers(ctx context.Context, cursor uint64, count int64) ([]string, uint64, error) {
	keys, next, err := s.rdb.Scan(ctx, cursor, s.prefix+"u:{*}", count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	users := make([]string, 0, len(keys))
	for _, k := range keys {
		if u, ok := s.userFromKey(k); ok {
			users = append(users, u)
		}
	}
	return users, next, nil
}

// parseValue decodes "v1:re:rs:rm:de:ds:dm:dev:ts".
func parseValue(k receipt.Key, v string) (receipt.State, error) {
	p := strings.Split(v, ":")
	if len(p) != 9 || p[0] != "v1" {
		return receipt.State{}, fmt.Errorf("decoding redis value for %s: unexpected %q", k.KafkaKey(), v)
	}
	nums := make([]int64, 0, 5)
	for _, i := range []int{1, 2, 4, 5, 8} {
		n, err := strconv.ParseInt(p[i], 10, 64)
		if err != nil {
			return receipt.State{}, fmt.Errorf("decoding redis value for %s: %w", k.KafkaKey(), err)
		}
		nums = append(nums, n)
	}
	return receipt.State{
		Key:             k,
		Read:            receipt.Cursor{Position: receipt.Position{Epoch: nums[0], Seq: nums[1]}, MessageID: p[3]},
		Delivered:       receipt.Cursor{Position: receipt.Position{Epoch: nums[2], Seq: nums[3]}, MessageID: p[6]},
		DeviceID:        p[7],
		UpdatedAtUnixMs: nums[4],
	}, nil
}
