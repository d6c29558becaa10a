package mentions

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A user's mentions live in one hash per user:
//
//	mh:{user}   hash: channel → the kept mention seqs of the user there,
//	            ascending, space-separated, each a padded seq
//	            (redisstore.PadSeq: 11 base-62 digits, so that byte order
//	            is numeric order for every int64), the newest cap+1
//	            (channel.Mentions); redisstore.LoadedField once hydrated
//
// One hash per user, not a key per channel: the unread read takes all of
// a user's mentions with one read and counts them itself: redisstore's
// unread view still reads the hash by its own name of it, until the
// views move.

// keyTag starts the key of a user's hash (after the store's prefix).
const keyTag = "mh:"

// RedisKey is a user's mention hash.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + keyTag + "{" + user + "}" }

var (
	//go:embed add.lua
	luaAdd string

	addScript = redis.NewScript(luaAdd)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{addScript}
)

// AddRedis adds mention seqs to their users' mentions, each channel's
// kept to its newest cap+1, in one pipeline. The caller adds mentions of
// members only.
func (s Store) AddRedis(ctx context.Context, ms []channel.Mentions) error {
	_, err := s.AddRedisReadingGenerations(ctx, ms)
	return err
}

// AddRedisReadingGenerations is AddRedis returning, per entry of ms, the
// user's erasure generation read in the script that added it
// (redisstore.GenerationUnknown: no tombstone in Redis; 0 for an entry
// without seqs, which is not written): the gateway stamps it on the
// mention's event.
func (s Store) AddRedisReadingGenerations(ctx context.Context, ms []channel.Mentions) ([]int64, error) {
	cmds := make([]*redis.Cmd, len(ms))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, m := range ms {
			if len(m.Seqs) == 0 {
				continue
			}
			argv := make([]any, 0, 2+len(m.Seqs))
			argv = append(argv, s.mentionCap+1, m.Key.Channel)
			for _, q := range m.Seqs {
				argv = append(argv, redisstore.PadSeq(q))
			}
			cmds[i] = addScript.EvalSha(ctx, pipe, []string{s.RedisKey(m.Key.User), s.redis.TombstoneKey(m.Key.User)}, argv...)
		}
	}, Scripts...)
	if err != nil {
		return nil, fmt.Errorf("adding mentions: %w", err)
	}
	gens := make([]int64, len(ms))
	for i, c := range cmds {
		if c == nil {
			continue
		}
		g, err := c.Text()
		if err == nil {
			gens[i], err = redisstore.ParseGeneration(g)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: adding mentions: %w", redisstore.ErrUnavailable, err)
		}
	}
	return gens, nil
}

// HydrateRedis adds a user's durable mentions (each key's newest cap+1)
// and then marks the user's hash complete, so that reads trust it. Every
// write is a union: a mention added meanwhile stays.
func (s Store) HydrateRedis(ctx context.Context, user string, ms []channel.Mentions) error {
	if err := s.AddRedis(ctx, ms); err != nil {
		return fmt.Errorf("hydrating the mentions of %s: %w", user, err)
	}
	if err := s.redis.Client().HSet(ctx, s.RedisKey(user), redisstore.LoadedField, "1").Err(); err != nil {
		return fmt.Errorf("%w: marking the mentions of %s complete: %w", redisstore.ErrUnavailable, user, err)
	}
	return nil
}

// ReadRedis returns the kept seqs of each key, ascending (nil: none).
func (s Store) ReadRedis(ctx context.Context, keys []receipt.Key) ([][]int64, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.RedisKey(k.User), k.Channel)
		}
	}); err != nil {
		return nil, err
	}
	out := make([][]int64, len(keys))
	err := s.redis.ReadEach(cmds, func(i int, v string) error {
		seqs, err := decode(keys[i], v)
		out[i] = seqs
		return err
	})
	return out, err
}

// UserRedis returns every channel's kept mention seqs of a user, and
// whether the hash is hydrated.
func (s Store) UserRedis(ctx context.Context, user string) ([]channel.Mentions, bool, error) {
	m, err := s.redis.Client().HGetAll(ctx, s.RedisKey(user)).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: reading the mentions of %s: %w", redisstore.ErrUnavailable, user, err)
	}
	_, complete := m[redisstore.LoadedField]
	out := make([]channel.Mentions, 0, len(m))
	for ch, v := range m {
		if strings.HasPrefix(ch, ":") {
			continue
		}
		k := receipt.Key{User: user, Channel: ch}
		seqs, err := decode(k, v)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		out = append(out, channel.Mentions{Key: k, Seqs: seqs})
	}
	return out, complete, nil
}

// ScanRedisUsers returns one SCAN page of the users with a mention hash
// and the cursor of the next page.
func (s Store) ScanRedisUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, keyTag, cur, count)
}

// ParseSeqList reads a stored mention list: space-separated padded seqs
// (redisstore.PadSeq), ascending, nil when it holds none.
func ParseSeqList(v string) ([]int64, error) { return AppendSeqList(nil, v) }

// AppendSeqList appends the seqs of a stored mention list (or of its
// tail: the unread view decodes only the seqs above a read, which byte
// order finds without decoding) to dst.
func AppendSeqList(dst []int64, v string) ([]int64, error) {
	for m := range strings.FieldsSeq(v) {
		q, err := redisstore.ParsePadded(m)
		if err != nil || len(m) != redisstore.SeqWidth {
			return dst, fmt.Errorf("%q is not a padded seq", m)
		}
		dst = append(dst, q)
	}
	return dst, nil
}

// decode reads a stored mention list (nil when it holds none).
func decode(k receipt.Key, v string) ([]int64, error) {
	seqs, err := ParseSeqList(v)
	if err != nil {
		return nil, fmt.Errorf("decoding the redis mentions of %s: %w", k.KafkaKey(), err)
	}
	return seqs, nil
}
