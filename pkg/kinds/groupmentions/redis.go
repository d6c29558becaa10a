package groupmentions

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A channel's group mentions live in a sorted set per channel:
//
//	gm:{channel}   sorted set: every member has score 0 and is the padded
//	               seq (redisstore.PadSeq) followed by the sender
//	               (codec.go), so the set's order is seq order and a
//	               seq's members sort by sender
//
// The channel value (heads.Store.RedisKey) holds the greatest kept
// seq (padded) as its fifth part, read with the heads: a channel whose
// top is at or below a user's read costs the unread read nothing more,
// and an unknown top means "not known" (hydrate from Postgres). The
// unread view (pkg/views/unread) reads the mentions above a user's read
// through ReadAboveRedis.

// keyTag starts the key of a channel's set (after the store's prefix).
const keyTag = "gm:"

// RedisKey is a channel's group mention set.
func (s Store) RedisKey(ch string) string { return s.redis.Prefix() + keyTag + "{" + ch + "}" }

var (
	//go:embed merge.lua
	luaMerge string
	//go:embed redact.lua
	luaRedact string

	mergeScript  = redis.NewScript(heads.LuaChannelValue + luaMerge)
	redactScript = redis.NewScript(luaRedact)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{mergeScript, redactScript}
)

// AddRedis merges group mentions into Redis, each channel's kept to its
// newest cap+1, in one pipeline.
func (s Store) AddRedis(ctx context.Context, gms []channel.GroupMentions) error {
	return s.mergeRedis(ctx, gms, "w")
}

// HydrateRedis merges Postgres' group mentions of channels into Redis
// and marks the channels known (an entry without mentions records that
// the channel has none).
func (s Store) HydrateRedis(ctx context.Context, gms []channel.GroupMentions) error {
	return s.mergeRedis(ctx, gms, "h")
}

func (s Store) mergeRedis(ctx context.Context, gms []channel.GroupMentions, mode string) error {
	cmds := make([]*redis.Cmd, 0, len(gms))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		// Exec builds the pipeline again after reloading lost scripts:
		// only the last attempt's answers count.
		cmds = cmds[:0]
		for _, g := range gms {
			if len(g.Mentions) == 0 && mode != "h" {
				continue
			}
			argv := make([]any, 0, 2+len(g.Mentions))
			argv = append(argv, s.mentionCap+1, mode)
			for _, m := range g.Mentions {
				argv = append(argv, encode(m))
			}
			cmds = append(cmds, mergeScript.EvalSha(ctx, pipe, []string{s.RedisKey(g.Channel), heads.NewStore(nil, s.redis).RedisKey(g.Channel)}, argv...))
		}
	}, Scripts...)
	if err == nil {
		for _, c := range cmds {
			if err = c.Err(); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: merging group mentions: %w", redisstore.ErrUnavailable, err)
	}
	return nil
}

// ReadRedis returns each channel's kept group mentions, ascending (nil:
// Redis holds no set for it).
func (s Store) ReadRedis(ctx context.Context, channels []string) ([]*channel.GroupMentions, error) {
	cmds := make([]*redis.StringSliceCmd, len(channels))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cmds[i] = pipe.ZRange(ctx, s.RedisKey(ch), 0, -1)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]*channel.GroupMentions, len(channels))
	for i, c := range cmds {
		ms, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading group mentions: %w", redisstore.ErrUnavailable, err)
		}
		if len(ms) == 0 {
			continue
		}
		g := &channel.GroupMentions{Channel: channels[i]}
		for _, m := range ms {
			gm, err := decode(m)
			if err != nil {
				s.redis.SkipUndecodable()
				continue
			}
			g.Mentions = append(g.Mentions, gm)
		}
		out[i] = g
	}
	return out, nil
}

// ReadAboveRedis returns, for each channel, its kept group mentions above
// the read seq of the same index, ascending (nil: the set holds none
// above it, or no set; empty: only undecodable ones), in one pipeline: what the unread view reads of a channel whose top (the
// channel value's fifth part) is above a user's read.
func (s Store) ReadAboveRedis(ctx context.Context, channels []string, reads []int64) ([][]channel.GroupMention, error) {
	cmds := make([]*redis.StringSliceCmd, len(channels))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			from := "[" + redisstore.PadSeq(reads[i]+1)
			cmds[i] = pipe.ZRangeByLex(ctx, s.RedisKey(ch), &redis.ZRangeBy{Min: from, Max: "+"})
		}
	}); err != nil {
		return nil, err
	}
	out := make([][]channel.GroupMention, len(channels))
	for i, c := range cmds {
		ms, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: reading group mentions: %w", redisstore.ErrUnavailable, err)
		}
		if len(ms) > 0 {
			out[i] = make([]channel.GroupMention, 0, len(ms))
		}
		for _, m := range ms {
			gm, err := decode(m)
			if err != nil {
				s.redis.SkipUndecodable()
				continue
			}
			out[i] = append(out[i], gm)
		}
	}
	return out, nil
}

// RedactRedis keeps user's group mentions in channel ch with no sender:
// the kind's part of an erasure (Spec.RedisRedact).
func (s Store) RedactRedis(ctx context.Context, user, ch string) error {
	if err := redactScript.Run(ctx, s.redis.Client(), []string{s.RedisKey(ch)}, user).Err(); err != nil {
		return fmt.Errorf("%w: redacting %s in the group mentions of %s: %w", redisstore.ErrUnavailable, user, ch, err)
	}
	return nil
}

// ScanRedisChannels returns one SCAN page of the channels with a group
// mention set and the cursor of the next page.
func (s Store) ScanRedisChannels(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, keyTag, cur, count)
}
