package fullyread

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/redisstore"
)

// A user's markers live in one hash per user:
//
//	fr:{user}   hash: "CHANNEL ROOT" → a marker (codec.go); ":loaded"
//	            once hydrated from Postgres, so a read that finds it
//	            trusts the hash whole
//
// merged by Merge: the greater (seq, time, message id).

// keyTag starts the key of a user's hash (after the store's prefix).
const keyTag = "fr:"

// RedisKey is a user's marker hash.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + keyTag + "{" + user + "}" }

var (
	//go:embed merge.lua
	luaMerge string

	mergeScript = redis.NewScript(redisstore.LuaCommon + redisstore.LuaMergeFields + luaMerge)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{mergeScript}
)

// Result is the outcome of one marker's merge.
type Result struct {
	// Marker is the user's marker after the merge.
	Marker  Marker
	Changed bool
	// Generation is the user's erasure generation the script read, and
	// Complete whether the user's hash is hydrated (Set only): without
	// it, Postgres may hold a greater marker than the one merged.
	Generation int64
	Complete   bool
	Err        error
}

// MergeRedis merges markers into their users' hashes in one pipeline.
func (s Store) MergeRedis(ctx context.Context, ms []Marker) ([]Result, error) {
	out := make([]Result, len(ms))
	cmds := make([]*redis.Cmd, len(ms))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, m := range ms {
			cmds[i] = mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(m.Key.User)}, "0", redisstore.DefaultsTTL.Milliseconds(), field(m.Ref), encode(m))
		}
	}, Scripts...)
	for i, m := range ms {
		res, rerr := cmds[i].Slice()
		if rerr != nil || len(res) != 2 {
			out[i].Err = fmt.Errorf("%w: merging the fully-read marker of %s: %w", redisstore.ErrUnavailable, m.Key.KafkaKey(), rerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _ := res[1].(string)
		out[i].Marker, out[i].Err = decode(m.Ref, v)
		out[i].Changed = changed == 1
	}
	return out, err
}

// Set merges a marker the user sets (the gateway's write) and returns
// the marker after it, with the user's erasure generation the script
// read and whether the hash is complete (Result.Generation, Complete).
func (s Store) Set(ctx context.Context, m Marker) Result {
	out := Result{Marker: m}
	res, err := mergeScript.Run(ctx, s.redis.Client(), []string{s.RedisKey(m.Key.User), s.redis.TombstoneKey(m.Key.User)},
		"0", redisstore.DefaultsTTL.Milliseconds(), field(m.Ref), encode(m)).Slice()
	if err != nil || len(res) != 4 {
		out.Err = fmt.Errorf("%w: setting the fully-read marker of %s: %w", redisstore.ErrUnavailable, m.Key.KafkaKey(), err)
		return out
	}
	changed, _ := res[0].(int64)
	v, _ := res[1].(string)
	if out.Marker, out.Err = decode(m.Ref, v); out.Err != nil {
		return out
	}
	g, _ := res[2].(string)
	out.Generation, out.Err = redisstore.ParseGeneration(g)
	out.Changed = out.Err == nil && changed == 1
	loaded, _ := res[3].(int64)
	out.Complete = loaded == 1
	return out
}

// ReadRedis returns user's markers of refs (all of the user's) Redis
// holds, and whether the hash is complete (hydrated): without it, absent
// markers are unknown, not unset.
func (s Store) ReadRedis(ctx context.Context, user string, refs []Ref) (map[Ref]Marker, bool, error) {
	fields := make([]string, 0, len(refs)+1)
	fields = append(fields, redisstore.LoadedField)
	for _, r := range refs {
		fields = append(fields, field(r))
	}
	vals, err := s.redis.Client().HMGet(ctx, s.RedisKey(user), fields...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	out := make(map[Ref]Marker, len(refs))
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if m, err := decode(refs[i], str); err == nil {
			out[refs[i]] = m
		} else {
			s.redis.SkipUndecodable()
		}
	}
	return out, vals[0] != nil, nil
}

// ReadRedisRefs returns each ref's marker (nil where absent) in one
// pipelined round trip: the drift sweep's lookup of a page.
func (s Store) ReadRedisRefs(ctx context.Context, refs []Ref) ([]*Marker, error) {
	cmds := make([]*redis.StringCmd, len(refs))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, r := range refs {
			cmds[i] = pipe.HGet(ctx, s.RedisKey(r.Key.User), field(r))
		}
	}); err != nil {
		return nil, err
	}
	out := make([]*Marker, len(refs))
	err := s.redis.ReadEach(cmds, func(i int, v string) error {
		m, err := decode(refs[i], v)
		if err == nil {
			out[i] = &m
		}
		return err
	})
	return out, err
}

// Hydrate merges a user's durable markers (from Postgres) and, with
// complete, marks the hash complete, in chunks of redisstore.HydrateChunk.
// Every write is a merge: a marker set meanwhile wins.
func (s Store) Hydrate(ctx context.Context, user string, ms []Marker, complete bool) error {
	for start := 0; ; start += redisstore.HydrateChunk {
		end := min(start+redisstore.HydrateChunk, len(ms))
		mark := "0"
		if end == len(ms) && complete {
			mark = "1"
		}
		argv := []any{mark, redisstore.DefaultsTTL.Milliseconds()}
		for _, m := range ms[start:end] {
			argv = append(argv, field(m.Ref), encode(m))
		}
		if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
			mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(user)}, argv...)
		}, Scripts...); err != nil {
			return fmt.Errorf("hydrating the fully-read markers of %s: %w", user, err)
		}
		if end == len(ms) {
			return nil
		}
	}
}

// ScanRedisUsers returns one SCAN page of the users with a marker hash and
// the cursor of the next page.
func (s Store) ScanRedisUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, keyTag, cur, count)
}

// UserRedis returns every marker of user's hash, read in HSCAN pages (a
// hash is never read whole in one command), skipping and counting fields
// that do not decode.
func (s Store) UserRedis(ctx context.Context, user string) ([]Marker, error) {
	var out []Marker
	seen := map[Ref]bool{} // HSCAN may return a field twice
	key := s.RedisKey(user)
	for cur := uint64(0); ; {
		kv, next, err := s.redis.Client().HScan(ctx, key, cur, "*", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if strings.HasPrefix(kv[i], ":") {
				continue
			}
			r, err := parseField(user, kv[i])
			var m Marker
			if err == nil {
				m, err = decode(r, kv[i+1])
			}
			if err != nil {
				s.redis.SkipUndecodable()
				continue
			}
			if !seen[r] {
				seen[r] = true
				out = append(out, m)
			}
		}
		if cur = next; cur == 0 {
			return out, nil
		}
	}
}
