package notifications

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Levels is what a user's badge needs of the notification state, read in
// one pipelined round trip: the user's settings (the default level) and
// the registers of the channels counted.
type Levels struct {
	// Settings holds the default level; SettingsFound is false when Redis
	// holds no settings (read Postgres, as Settings' callers do).
	Settings      privacy.Settings
	SettingsFound bool
	// Registers are the listed channels' registers Redis holds; Complete
	// says the hash is hydrated, so an absent one is unset.
	Registers map[string]notification.Register
	Complete  bool
}

// LevelsOf reads a user's settings and the registers of the listed
// channels (at least one) in one pipeline.
func (s Store) LevelsOf(ctx context.Context, user string, channels []string) (Levels, error) {
	var probe levelsProbe
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		probe = s.queueLevels(ctx, pipe, user, channels, false)
	}); err != nil {
		return Levels{}, err
	}
	return probe.result()
}

// LevelsRead is LevelsOf riding the unread read's pipeline (a rider of
// the unread view, pkg/views/unread), saving its round trip: hand it to
// the view's read, then read Levels.
type LevelsRead struct {
	s     Store
	probe *levelsProbe
}

// NewLevelsRead is a LevelsRead for one unread read.
func (s Store) NewLevelsRead() *LevelsRead { return &LevelsRead{s: s} }

// Queue queues the read of user's registers of channels on pipe (the
// unread view's Rider).
func (r *LevelsRead) Queue(ctx context.Context, pipe redis.Pipeliner, user string, channels []string) {
	p := r.s.queueLevels(ctx, pipe, user, channels, true)
	r.probe = &p
}

// Levels is what the read brought, nil when it was not read or failed
// (the caller reads LevelsOf then).
func (r *LevelsRead) Levels() *Levels {
	if r == nil || r.probe == nil {
		return nil
	}
	l, err := r.probe.result()
	if err != nil {
		return nil
	}
	return &l
}

// levelsProbe is LevelsOf's reads queued on a pipeline.
type levelsProbe struct {
	s        Store
	user     string
	channels []string
	settings settings.Probe
	regs     *redis.SliceCmd
	// whole is the user's hash read whole, in place of regs.
	whole *redis.KeyValueSliceCmd
}

// levelsWholeFrom is how many channels make queueLevels read the user's
// notification hash whole when it may: a user sets levels in few of many
// channels, and an HMGET of a thousand fields mostly answering nil cost
// more than the hash.
const levelsWholeFrom = 64

// queueLevels queues LevelsOf's reads; mayReadWhole lets it read the whole
// hash for many channels (its answer then fails for a hash over
// redisstore.MaxUnreadChannels: read LevelsOf).
func (s Store) queueLevels(ctx context.Context, pipe redis.Pipeliner, user string, channels []string, mayReadWhole bool) levelsProbe {
	p := levelsProbe{s: s, user: user, channels: channels, settings: settings.NewStore(nil, s.redis).Queue(ctx, pipe, user)}
	if mayReadWhole && len(channels) >= levelsWholeFrom {
		p.whole = pipe.HRandFieldWithValues(ctx, s.RedisKey(user), redisstore.WholeHashCount)
	} else {
		p.regs = pipe.HMGet(ctx, s.RedisKey(user), append([]string{redisstore.LoadedField}, channels...)...)
	}
	return p
}

func (p levelsProbe) result() (Levels, error) {
	out := Levels{Registers: make(map[string]notification.Register)}
	var err error
	if out.Settings, out.SettingsFound, err = p.settings.Result(); err != nil {
		return Levels{}, err
	}
	if p.whole != nil {
		return p.wholeResult(out)
	}
	vals, err := p.regs.Result()
	if err != nil {
		return Levels{}, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	out.Complete = vals[0] != nil
	p.s.decodeFields(p.user, p.channels, vals[1:], out.Registers)
	return out, nil
}

// wholeResult is result from the hash read whole: the registers of every
// channel it holds (a caller looks its channels up).
func (p levelsProbe) wholeResult(out Levels) (Levels, error) {
	kvs, err := p.whole.Result()
	switch {
	case err != nil:
		return Levels{}, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	case len(kvs) >= redisstore.WholeHashCount:
		return Levels{}, fmt.Errorf("%w: user %s has more than %d notification registers", redisstore.ErrTooManyChannels, p.user, redisstore.MaxUnreadChannels)
	}
	for _, kv := range kvs {
		if kv.Key == redisstore.LoadedField {
			out.Complete = true
			continue
		}
		if strings.HasPrefix(kv.Key, ":") {
			continue // a marker
		}
		if r, err := decode(receipt.Key{User: p.user, Channel: kv.Key}, kv.Value); err == nil {
			out.Registers[kv.Key] = r
		} else {
			p.s.redis.SkipUndecodable()
		}
	}
	return out, nil
}
