package seam

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// MaxHydrateMembers bounds the registers of a channel the gate copies
// from Postgres into Redis when Redis lost the channel's membership hash;
// a larger channel is checked against Postgres per call instead.
const MaxHydrateMembers = 10_000

const hydratePage = 1000

// Facts is what the gate knows of the channels and keys of one call:
// Redis first; a head or a membership hash Redis does not know is read
// from Postgres and copied into Redis (by merges, so a newer write made
// meanwhile wins), so the next call finds it there.
type Facts struct {
	// known is false when neither store could answer (Redis down): the
	// checks are skipped and the answer says realtime_degraded.
	Known    bool
	channels map[string]*ChannelFacts
	keys     map[receipt.Key]members.KeyFacts
}

// ChannelFacts is what Redis holds of one channel for the gateway's
// checks: its head and whether its membership hash is complete and has
// registers (members.ChannelFacts).
type ChannelFacts struct {
	Channel string
	// Head is the channel's head; HeadKnown false means Redis knows
	// nothing of it (a known channel without messages has Seq 0).
	Head      channel.Head
	HeadKnown bool
	members.ChannelFacts
}

// Head returns the channel's head seq (0 when none is known).
func (f *Facts) Head(ch string) int64 {
	if c := f.channels[ch]; c != nil {
		return c.Head.Seq
	}
	return 0
}

// Member reports whether the user is a member of the channel, and whether
// the channel has registered members at all (otherwise membership is not
// tracked for it and every user may mark it).
func (f *Facts) Member(k receipt.Key) (member, registered bool) {
	c := f.channels[k.Channel]
	if c == nil || !c.Registered {
		return false, false
	}
	r := f.keys[k].InChannel
	return r != nil && r.Member, true
}

// UserRegister is the user's register in the channel as the user's hash
// (or, when that lacks it, the channel's hash) holds it.
func (f *Facts) UserRegister(k receipt.Key) (channel.Membership, bool) {
	kf := f.keys[k]
	var m channel.Membership
	ok := false
	for _, r := range []*channel.Membership{kf.InUser, kf.InChannel} {
		if r != nil {
			m, _ = channel.MergeMembership(m, *r)
			ok = true
		}
	}
	return m, ok
}

// Lookup gathers the facts of keys. Redis failing leaves them unknown
// (the write path still makes the call durable); Postgres failing during
// a fallback leaves what Redis had.
func (g *Core) Lookup(ctx context.Context, keys []receipt.Key, userRegisters bool) *Facts {
	f := &Facts{keys: make(map[receipt.Key]members.KeyFacts, len(keys))}
	if len(keys) == 0 {
		f.Known = true
		return f
	}
	chs, kfs, err := g.redisFacts(ctx, keys, userRegisters)
	g.completeFacts(ctx, f, chs, kfs, err)
	return f
}

// redisFacts reads, in one pipelined round trip, the facts of every
// channel of keys (once per channel) and the registers of every key: the
// checks of a write (seq within the head, membership) need nothing else.
// With userRegisters it also reads each key's register in the user's
// hash (what a join or leave orders itself after).
func (g *Core) redisFacts(ctx context.Context, keys []receipt.Key, userRegisters bool) (map[string]*ChannelFacts, []members.KeyFacts, error) {
	var read func() (map[string]*ChannelFacts, []members.KeyFacts, error)
	if _, err := g.Redis.Exec(ctx, func(pipe redis.Pipeliner) {
		read = g.queueFacts(ctx, pipe, keys, userRegisters)
	}); err != nil {
		return nil, nil, err
	}
	return read()
}

// queueFacts adds the commands of redisFacts to pipe: the membership
// kind's (members.Store.QueueFacts) and the heads of their channels; the
// returned function reads their answers once the pipeline ran.
func (g *Core) queueFacts(ctx context.Context, pipe redis.Pipeliner, keys []receipt.Key, userRegisters bool) func() (map[string]*ChannelFacts, []members.KeyFacts, error) {
	order, readMembers := g.MemberStore().QueueFacts(ctx, pipe, keys, userRegisters)
	heads := g.HeadStore().QueueChannelValues(ctx, pipe, order)
	return func() (map[string]*ChannelFacts, []members.KeyFacts, error) {
		mfs, kfs, err := readMembers()
		if err != nil {
			return nil, nil, err
		}
		facts := make(map[string]*ChannelFacts, len(order))
		for i, ch := range order {
			f := &ChannelFacts{Channel: ch, ChannelFacts: mfs[i]}
			head, known, err := heads.Head(i)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
			}
			if known {
				if f.Head, err = redisstore.DecodeHead(ch, head); err != nil {
					return nil, nil, err
				}
				f.HeadKnown = true
			}
			facts[ch] = f
		}
		return facts, kfs, nil
	}
}

// LookupForWrite is lookup(keys, false) for a write: the same round trip
// also reads the keys' stored values for the merge that follows the
// checks (factsAndValues).
func (g *Core) LookupForWrite(ctx context.Context, keys []receipt.Key) (*Facts, *cursors.MarkValues) {
	f := &Facts{keys: make(map[receipt.Key]members.KeyFacts, len(keys))}
	if len(keys) == 0 {
		f.Known = true
		return f, nil
	}
	chs, kfs, vals, err := g.factsAndValues(ctx, keys)
	g.completeFacts(ctx, f, chs, kfs, err)
	return f, vals
}

// factsAndValues reads, in one pipelined round trip, what a write of
// marks of keys needs before it merges: redisFacts(keys, false) for its
// checks and the keys' stored values for MergeMarksFrom
// (redisstore.Store.QueueMarkValues). The merge's reads then share the
// checks' round trip: a write takes two round trips (this one and the
// compare-and-set), not three. Values that could not be read are left
// out of vals (the merge reads them again); err is the facts' error.
func (g *Core) factsAndValues(ctx context.Context, keys []receipt.Key) (map[string]*ChannelFacts, []members.KeyFacts, *cursors.MarkValues, error) {
	var readValues func() *cursors.MarkValues
	var readFacts func() (map[string]*ChannelFacts, []members.KeyFacts, error)
	if _, err := g.Redis.Exec(ctx, func(pipe redis.Pipeliner) {
		// The scripts first: a script cache Redis lost is then the
		// pipeline's first error, which Exec mends (a missing head, a
		// nil reply, would come first otherwise).
		readValues = g.CursorStore().QueueMarkValues(ctx, pipe, keys)
		readFacts = g.queueFacts(ctx, pipe, keys, false)
	}); err != nil {
		// Whatever failed, the checks need their facts alone more.
		chs, kfs, err := g.redisFacts(ctx, keys, false)
		return chs, kfs, &cursors.MarkValues{}, err
	}
	chs, kfs, err := readFacts()
	if err != nil {
		return nil, nil, nil, err
	}
	return chs, kfs, readValues(), nil
}

// completeFacts fills f from what Redis answered (err: nothing, f stays
// unknown), then reads from Postgres the heads and the membership hashes
// Redis lacks.
func (g *Core) completeFacts(ctx context.Context, f *Facts, chs map[string]*ChannelFacts, kfs []members.KeyFacts, err error) {
	if err != nil {
		g.RedisDegradedOn(ctx, RedisOpGet, 1, err)
		return
	}
	f.Known, f.channels = true, chs
	for _, kf := range kfs {
		f.keys[kf.Key] = kf
	}

	var missingHeads []string
	for ch, c := range chs {
		if !c.HeadKnown {
			missingHeads = append(missingHeads, ch)
		}
	}
	if len(missingHeads) > 0 {
		g.fillHeads(ctx, chs, missingHeads)
	}
	for ch, c := range chs {
		if !c.MembersComplete {
			g.fillMembers(ctx, f, ch)
		}
	}
}

// fillHeads reads heads Redis lacks from Postgres and copies them (and
// the channels known to have none) into Redis.
func (g *Core) fillHeads(ctx context.Context, chs map[string]*ChannelFacts, missing []string) {
	if err := g.Settled(ctx, nil, missing); err != nil {
		tracing.Logger(ctx, g.Log).Warn("reading channel heads Redis lacks; checking without them", zap.Int("num_channels", len(missing)), zap.Error(err))
		return
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	heads, err := g.HeadStore().ReadPG(pctx, missing)
	cancel()
	if err != nil {
		tracing.Logger(ctx, g.Log).Warn("reading channel heads Redis lacks; checking without them", zap.Int("num_channels", len(missing)), zap.Error(err))
		return
	}
	found := map[string]bool{}
	for _, h := range heads {
		chs[h.Channel].Head, _ = channel.MergeHead(chs[h.Channel].Head, h)
		chs[h.Channel].HeadKnown = true
		found[h.Channel] = true
	}
	var none []string
	for _, ch := range missing {
		if !found[ch] {
			none = append(none, ch)
		}
	}
	if err := g.HeadStore().HydrateRedis(ctx, heads, none); err != nil {
		g.RedisDegradedOn(ctx, RedisOpHydrate, 1, err)
	}
}

var errTooManyMembers = errors.New("too many members to hydrate")

// fillMembers completes a channel's membership facts from Postgres: a
// channel of at most MaxHydrateMembers registers is copied into Redis
// whole (then marked complete); a larger one has the call's users looked
// up in Postgres.
func (g *Core) fillMembers(ctx context.Context, f *Facts, ch string) {
	c := f.channels[ch]
	regs, hydrated, err := g.DurableMembers(ctx, ch)
	c.MembersComplete = hydrated
	if errors.Is(err, errTooManyMembers) {
		var users []string
		for k := range f.keys {
			if k.Channel == ch {
				users = append(users, k.User)
			}
		}
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		regs, err = g.MemberStore().ChannelUsersPG(pctx, ch, users)
		cancel()
		c.Registered = true
	}
	if err != nil {
		tracing.Logger(ctx, g.Log).Warn("reading channel members Redis lacks; checking with what Redis holds", zap.String("channel_id", ch), zap.Error(err))
		return
	}
	for _, r := range regs {
		c.Registered = true
		if kf, ok := f.keys[r.Key]; ok {
			merged := r
			if kf.InChannel != nil {
				merged, _ = channel.MergeMembership(*kf.InChannel, r)
			}
			kf.InChannel = &merged
			f.keys[r.Key] = kf
		}
	}
}

// DurableMembers reads a channel's registers from Postgres and hydrates
// Redis with them (marking the hash complete), or answers
// errTooManyMembers past MaxHydrateMembers. hydrated says Redis now holds
// the channel's whole membership hash.
func (g *Core) DurableMembers(ctx context.Context, ch string) (regs []channel.Membership, hydrated bool, err error) {
	if err := g.Settled(ctx, nil, []string{ch}); err != nil {
		return nil, false, fmt.Errorf("reading the members of %s: %w", ch, err)
	}
	var all []channel.Membership
	after := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		page, err := g.MemberStore().ChannelPagePG(pctx, ch, after, hydratePage, false)
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("reading the members of %s: %w", ch, err)
		}
		all = append(all, page...)
		if len(all) > MaxHydrateMembers {
			return nil, false, errTooManyMembers
		}
		if len(page) < hydratePage {
			break
		}
		after = page[len(page)-1].Key.User
	}
	if err := g.MemberStore().HydrateChannelMembers(ctx, ch, all, true); err != nil {
		g.RedisDegradedOn(ctx, RedisOpHydrate, 1, err)
		return all, false, nil
	}
	return all, true, nil
}

// Channel is what the call knows of channel ch (nil: nothing).
func (f *Facts) Channel(ch string) *ChannelFacts { return f.channels[ch] }
