package threads

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The reads of a user's threads (ListThreads, the thread counts of
// GetUnread, read-all): the registers with the memberships of their
// channels in one script (both hashes carry the user's hash tag), then
// the heads in one pipeline of one HMGET per channel.

// userThreadsScript reads a user's registers, of the fields starting with
// ARGV[2] ("" all), unless there are more than ARGV[1]; with KEYS[2] (the
// user's membership hash), also the user's registers of the channels those
// threads are in. KEYS[1] = tu hash. Returns {loaded (0/1), {field,
// value, ...}, {channel, ...}, {membership or false, ...}} (the last two
// only with KEYS[2]), or {-1, count}.
var (
	//go:embed userthreads.lua
	luaUserThreads    string
	userThreadsScript = redis.NewScript(luaUserThreads)
)

// UserRead is a user's thread registers with their channels'
// memberships, as one script read them.
type UserRead struct {
	States []thread.State
	// Complete: the registers' hash is hydrated (a thread missing from it
	// has no register).
	Complete bool
	// Memberships are the user's registers in the channels of States; a
	// channel without one is absent.
	Memberships []channel.Membership
	// MembershipsComplete: the user's membership hash is hydrated.
	MembershipsComplete bool
}

// UserThreads returns the user's registers, of one channel when channel is
// not "", and whether the hash is complete (hydrated from Postgres since
// it was last lost: a thread missing from it has no register). A user with
// more than MaxUserThreads registers is refused (ErrTooMany), the
// channel filter notwithstanding: it is applied in the script, after the
// count.
func (s Store) UserThreads(ctx context.Context, user, channel string) (states []thread.State, complete bool, err error) {
	r, err := s.userThreads(ctx, user, channel, false)
	return r.States, r.Complete, err
}

// UserThreadsWithMemberships is UserThreads with the user's memberships of
// the channels those threads are in, in the same round trip.
func (s Store) UserThreadsWithMemberships(ctx context.Context, user, channel string) (UserRead, error) {
	return s.userThreads(ctx, user, channel, true)
}

// AllUserThreads reads every register of a user (the collector's read),
// up to limit: ErrTooMany past it.
func (s Store) AllUserThreads(ctx context.Context, user string, limit int) ([]thread.State, error) {
	r, err := s.userThreadsUpTo(ctx, user, "", false, limit)
	return r.States, err
}

func (s Store) userThreads(ctx context.Context, user, ch string, memberships bool) (UserRead, error) {
	return s.userThreadsUpTo(ctx, user, ch, memberships, ReadMax)
}

func (s Store) userThreadsUpTo(ctx context.Context, user, ch string, memberships bool, limit int) (UserRead, error) {
	prefix := ""
	if ch != "" {
		prefix = ch + " "
	}
	keys := []string{s.RedisKey(user)}
	if memberships {
		keys = append(keys, members.NewStore(nil, s.redis).UserMembersKey(user))
	}
	res, err := userThreadsScript.Run(ctx, s.redis.Client(), keys, limit, prefix).Slice()
	if err != nil {
		return UserRead{}, fmt.Errorf("%w: reading the threads of %s: %w", redisstore.ErrUnavailable, user, err)
	}
	if flag, _ := res[0].(int64); flag == -1 {
		n, _ := res[1].(int64)
		return UserRead{}, fmt.Errorf("reading the threads of %s: %w: %d registers, the limit is %d", user, ErrTooMany, n, limit)
	}
	if want := 2 + 2*btoi(memberships); len(res) != want {
		return UserRead{}, fmt.Errorf("%w: reading the threads of %s: %d answers, want %d", redisstore.ErrUnavailable, user, len(res), want)
	}
	loaded, _ := res[0].(int64)
	regs, _ := res[1].([]any)
	out := UserRead{States: make([]thread.State, 0, len(regs)/2), Complete: loaded == 1}
	for j := 0; j+1 < len(regs); j += 2 {
		f, _ := regs[j].(string)
		v, _ := regs[j+1].(string)
		ref, err := parseThreadField(f)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		st, err := decodeThreadState(thread.Key{User: user, Ref: ref}, v)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		out.States = append(out.States, st)
	}
	if !memberships {
		return out, nil
	}
	chans, _ := res[2].([]any)
	vals, _ := res[3].([]any)
	if len(vals) != len(chans)+1 {
		return UserRead{}, fmt.Errorf("%w: reading the memberships of %s: %d values for %d channels", redisstore.ErrUnavailable, user, len(vals)-1, len(chans))
	}
	hydrated, _ := vals[0].(int64)
	out.MembershipsComplete = hydrated == 1
	out.Memberships = make([]channel.Membership, 0, len(chans))
	for i, c := range chans {
		v, ok := vals[i+1].(string)
		if !ok {
			continue
		}
		ch, _ := c.(string)
		m, err := members.DecodeRegister(receipt.Key{User: user, Channel: ch}, v)
		if err != nil {
			return UserRead{}, err
		}
		out.Memberships = append(out.Memberships, m)
	}
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// HeadsRedis returns the heads Redis holds of refs; a thread it holds
// nothing of is absent from the map.
func (s Store) HeadsRedis(ctx context.Context, refs []thread.Ref) (map[thread.Ref]thread.Head, error) {
	heads, err := s.HeadsAt(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make(map[thread.Ref]thread.Head, len(refs))
	for _, h := range heads {
		if h.Ref.Channel != "" {
			out[h.Ref] = h
		}
	}
	return out, nil
}

// HeadsAt returns the heads Redis holds of refs, in their order; a
// thread it holds nothing of has the zero head (no Ref). One HMGET per
// channel: a user's followed threads are many roots of few channels.
func (s Store) HeadsAt(ctx context.Context, refs []thread.Ref) ([]thread.Head, error) {
	type channelRefs struct {
		key    string
		fields []string
		at     []int // the refs' indexes
	}
	var groups []*channelRefs
	byChannel := map[string]*channelRefs{}
	for i, r := range refs {
		g := byChannel[r.Channel]
		if g == nil {
			g = &channelRefs{key: s.HeadsKey(r.Channel)}
			byChannel[r.Channel] = g
			groups = append(groups, g)
		}
		g.fields = append(g.fields, rootField(r))
		g.at = append(g.at, i)
	}
	cmds := make([]*redis.SliceCmd, len(groups))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, g := range groups {
			cmds[i] = pipe.HMGet(ctx, g.key, g.fields...)
		}
	}, Scripts...); err != nil {
		return nil, fmt.Errorf("reading thread heads: %w", err)
	}
	out := make([]thread.Head, len(refs))
	for i, g := range groups {
		vals, err := cmds[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: reading thread heads: %w", redisstore.ErrUnavailable, err)
		}
		for j, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue
			}
			k := g.at[j]
			if out[k], err = decodeThreadHead(refs[k], str); err != nil {
				s.redis.SkipUndecodable()
			}
		}
	}
	return out, nil
}

// Probe tells, on another read's pipeline (a rider of the unread view,
// pkg/views/unread: its unread read's, its inbox order's), whether the user's thread hash is hydrated and
// holds no register, so that there are no thread counts or lines to read.
// One probe serves one read.
type Probe struct {
	s      Store
	n      *redis.IntCmd
	loaded *redis.BoolCmd
}

// Probe is a probe of s's hashes, to hand a read as a rider.
func (s Store) Probe() *Probe { return &Probe{s: s} }

// Queue queues the probe of user's hash on pipe (the unread view's Rider).
func (p *Probe) Queue(ctx context.Context, pipe redis.Pipeliner, user string, _ []string) {
	k := p.s.RedisKey(user)
	p.n, p.loaded = pipe.HLen(ctx, k), pipe.HExists(ctx, k, redisstore.LoadedField)
}

// None is true when the read showed the hash hydrated and holding no
// register; false when it was not read or failed.
func (p *Probe) None() bool {
	return p.loaded != nil && p.loaded.Val() && p.n.Val() == 1
}
