package settings

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A user's settings live in one hash per user:
//
//	us:{user}   hash: field "s" → the register (codec.go); of version 0
//	            it caches the defaults read from Postgres and expires
//	            after redisstore.DefaultsTTL, so only active users keep
//	            a key; a real setting never expires
//
// merged by privacy.Merge: the greater version, on a tie the one sharing
// less, then the greater (quieter) level.

// keyTag starts the key of a user's hash (after the store's prefix).
const keyTag = "us:"

// field is the register's field in the user's hash.
const field = "s"

// RedisKey is a user's settings hash.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + keyTag + "{" + user + "}" }

var (
	//go:embed merge.lua
	luaMerge string

	mergeScript = redis.NewScript(redisstore.LuaCmp + luaMerge)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{mergeScript}
)

// MergeRedis merges settings registers in one pipeline and returns the
// stored settings after each.
func (s Store) MergeRedis(ctx context.Context, sts []privacy.Settings) ([]privacy.Settings, error) {
	cmds := make([]*redis.Cmd, len(sts))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, st := range sts {
			cmds[i] = mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(st.User)}, encode(st), redisstore.DefaultsTTL.Milliseconds())
		}
	}, Scripts...); err != nil {
		return nil, err
	}
	out := make([]privacy.Settings, len(sts))
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil || len(res) != 2 {
			return nil, fmt.Errorf("%w: merging settings of %s: %w", redisstore.ErrUnavailable, sts[i].User, err)
		}
		v, _ := res[1].(string)
		if out[i], err = decode(sts[i].User, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Change stores a user's new settings (st's version is replaced:
// merge.lua) and returns them as stored, with the user's erasure
// generation read in the same script (redisstore.GenerationUnknown: Redis
// holds no tombstone) for the gateway to stamp on the event.
func (s Store) Change(ctx context.Context, st privacy.Settings) (privacy.Settings, int64, error) {
	res, err := mergeScript.Run(ctx, s.redis.Client(), []string{s.RedisKey(st.User), s.redis.TombstoneKey(st.User)},
		encode(st), redisstore.DefaultsTTL.Milliseconds(), "1").Slice()
	if err != nil || len(res) != 3 {
		return privacy.Settings{}, 0, fmt.Errorf("%w: changing the settings of %s: %w", redisstore.ErrUnavailable, st.User, err)
	}
	v, _ := res[1].(string)
	stored, err := decode(st.User, v)
	if err != nil {
		return privacy.Settings{}, 0, err
	}
	g, _ := res[2].(string)
	gen, err := redisstore.ParseGeneration(g)
	return stored, gen, err
}

// ReadRedis reads users' settings in one pipeline; found[i] is false when
// Redis holds none for users[i] (never set, or lost: read Postgres and
// MergeRedis what it says, defaults included).
func (s Store) ReadRedis(ctx context.Context, users []string) (sts []privacy.Settings, found []bool, err error) {
	probes := make([]Probe, len(users))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			probes[i] = s.Queue(ctx, pipe, u)
		}
	}); err != nil {
		return nil, nil, err
	}
	sts, found = make([]privacy.Settings, len(users)), make([]bool, len(users))
	for i, p := range probes {
		if sts[i], found[i], err = p.Result(); err != nil {
			return nil, nil, err
		}
	}
	return sts, found, nil
}

// Probe is a user's settings read queued on a pipeline another read
// sends (the badge's levels ride the unread read's), saving its round
// trip.
type Probe struct {
	user string
	cmd  *redis.StringCmd
}

// Queue queues the read of user's settings on pipe.
func (s Store) Queue(ctx context.Context, pipe redis.Pipeliner, user string) Probe {
	return Probe{user: user, cmd: pipe.HGet(ctx, s.RedisKey(user), field)}
}

// Result is what the probe read, as ReadRedis answers: the defaults and
// found false when Redis holds none.
func (p Probe) Result() (st privacy.Settings, found bool, err error) {
	v, err := p.cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return privacy.Default(p.user), false, nil
	case err != nil:
		return privacy.Settings{}, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	if st, err = decode(p.user, v); err != nil {
		return privacy.Settings{}, false, err
	}
	return st, true, nil
}

// ScanRedisUsers returns one SCAN page of the users with a settings hash
// and the cursor of the next page.
func (s Store) ScanRedisUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, keyTag, cur, count)
}
