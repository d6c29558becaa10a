package notifications

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A user's notification registers live in one hash per user:
//
//	nl:{user}   hash: channel → a register (codec.go); ":loaded" once
//	            hydrated from Postgres, so a read that finds it trusts
//	            the hash whole
//
// merged by notification.Merge: the greater (version, level, muted until).

// keyTag starts the key of a user's hash (after the store's prefix).
const keyTag = "nl:"

// RedisKey is a user's notification hash.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + keyTag + "{" + user + "}" }

var (
	//go:embed registers.lua
	luaRegisters string
	//go:embed merge.lua
	luaMerge string
	//go:embed change.lua
	luaChange string

	mergeScript  = redis.NewScript(redisstore.LuaCmp + redisstore.LuaMergeFields + luaRegisters + luaMerge)
	changeScript = redis.NewScript(redisstore.LuaCmp + luaRegisters + luaChange)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{mergeScript, changeScript}
)

// Result is the outcome of one register's merge or change.
type Result struct {
	// Register is the user's register after the write.
	Register notification.Register
	Changed  bool
	// Generation is the user's erasure generation the change's script
	// read (Change only).
	Generation int64
	Err        error
}

// MergeRedis merges registers into their users' hashes in one pipeline.
func (s Store) MergeRedis(ctx context.Context, regs []notification.Register) ([]Result, error) {
	out := make([]Result, len(regs))
	cmds := make([]*redis.Cmd, len(regs))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, r := range regs {
			cmds[i] = mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(r.Key.User)}, "0", redisstore.DefaultsTTL.Milliseconds(), r.Key.Channel, encode(r))
		}
	}, Scripts...)
	for i := range regs {
		res, rerr := cmds[i].Slice()
		if rerr != nil || len(res) != 2 {
			out[i].Err = fmt.Errorf("%w: merging the notifications of %s: %w", redisstore.ErrUnavailable, regs[i].Key.KafkaKey(), rerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _ := res[1].(string)
		out[i].Register, out[i].Err = decode(regs[i].Key, v)
		out[i].Changed = changed == 1
	}
	return out, err
}

// Change writes a user's change of level and mute; Redis sets its
// version (change.lua), so two changes apply in their order whatever the
// gateways' clocks.
func (s Store) Change(ctx context.Context, r notification.Register) Result {
	out := Result{Register: r}
	arg := strconv.Itoa(int(r.Level)) + " " + strconv.FormatInt(r.MutedUntilUnixMs, 10)
	res, err := changeScript.Run(ctx, s.redis.Client(), []string{s.RedisKey(r.Key.User), s.redis.TombstoneKey(r.Key.User)}, r.Key.Channel, arg).Slice()
	if err != nil || len(res) != 3 {
		out.Err = fmt.Errorf("%w: changing the notifications of %s: %w", redisstore.ErrUnavailable, r.Key.KafkaKey(), err)
		return out
	}
	v, _ := res[1].(string)
	if out.Register, out.Err = decode(r.Key, v); out.Err != nil {
		return out
	}
	g, _ := res[2].(string)
	out.Generation, out.Err = redisstore.ParseGeneration(g)
	out.Changed = out.Err == nil
	return out
}

// ReadRedis returns a user's registers by channel, of all channels (more
// than redisstore.MaxUnreadChannels: redisstore.ErrTooManyChannels) or
// the listed ones, and whether the hash is complete (hydrated): without
// it, absent registers are unknown, not unset.
func (s Store) ReadRedis(ctx context.Context, user string, channels []string) (map[string]notification.Register, bool, error) {
	key := s.RedisKey(user)
	rdb := s.redis.Client()
	out := make(map[string]notification.Register)
	if len(channels) == 0 {
		n, err := rdb.HLen(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		if n > redisstore.MaxUnreadChannels+1 {
			return nil, false, fmt.Errorf("notifications of %s: %d registers: %w", user, n, redisstore.ErrTooManyChannels)
		}
		m, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		_, complete := m[redisstore.LoadedField]
		for ch, v := range m {
			if strings.HasPrefix(ch, ":") {
				continue
			}
			if r, err := decode(receipt.Key{User: user, Channel: ch}, v); err == nil {
				out[ch] = r
			} else {
				s.redis.SkipUndecodable()
			}
		}
		return out, complete, nil
	}
	vals, err := rdb.HMGet(ctx, key, append([]string{redisstore.LoadedField}, channels...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	s.decodeFields(user, channels, vals[1:], out)
	return out, vals[0] != nil, nil
}

// decodeFields puts into out the registers of an HMGET's answer vals for
// channels (nil: absent), skipping and counting those that do not decode.
func (s Store) decodeFields(user string, channels []string, vals []any, out map[string]notification.Register) {
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if r, err := decode(receipt.Key{User: user, Channel: channels[i]}, str); err == nil {
			out[channels[i]] = r
		} else {
			s.redis.SkipUndecodable()
		}
	}
}

// ReadRedisKeys returns each key's register (nil where absent) in one
// pipelined round trip: the drift sweep's lookup of a page.
func (s Store) ReadRedisKeys(ctx context.Context, keys []receipt.Key) ([]*notification.Register, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.RedisKey(k.User), k.Channel)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]*notification.Register, len(keys))
	err := s.redis.ReadEach(cmds, func(i int, v string) error {
		r, err := decode(keys[i], v)
		if err == nil {
			out[i] = &r
		}
		return err
	})
	return out, err
}

// Hydrate merges a user's durable registers (from Postgres) and marks
// the hash complete, in chunks of redisstore.HydrateChunk. Every write is
// a merge: a change written meanwhile wins.
func (s Store) Hydrate(ctx context.Context, user string, regs []notification.Register) error {
	for start := 0; ; start += redisstore.HydrateChunk {
		end := min(start+redisstore.HydrateChunk, len(regs))
		mark := "0"
		if end == len(regs) {
			mark = "1"
		}
		argv := []any{mark, redisstore.DefaultsTTL.Milliseconds()}
		for _, r := range regs[start:end] {
			argv = append(argv, r.Key.Channel, encode(r))
		}
		if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
			mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(user)}, argv...)
		}, Scripts...); err != nil {
			return fmt.Errorf("hydrating the notifications of %s: %w", user, err)
		}
		if end == len(regs) {
			return nil
		}
	}
}

// ScanRedisUsers returns one SCAN page of the users with a notification
// hash and the cursor of the next page.
func (s Store) ScanRedisUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, keyTag, cur, count)
}
