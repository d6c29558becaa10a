package redisstore

// A user's unread state across channels, read with plain pipelined
// commands (the bulk read behind GetUnread and ReadAll).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// ChannelView is what Redis holds for one user in one channel, and the
// counts it gives.
type ChannelView struct {
	Channel string
	// State is the user's cursors (HasState false: none in Redis).
	State    receipt.State
	HasState bool
	// Membership is the user's register (HasMembership false: none).
	Membership    channel.Membership
	HasMembership bool
	// Head is the channel's head; HeadKnown false means Redis knows
	// nothing of it (read Postgres and HydrateHeads). A known channel
	// without messages has a head of seq 0.
	Head      channel.Head
	HeadKnown bool
	// Mentions counts the kept mention seqs above the effective read seq;
	// MentionsCapped is true when they are more than the cap.
	Mentions       int64
	MentionsCapped bool
	// Unread and FirstUnread are channel.Unread of the head and the state.
	Unread, FirstUnread int64
}

// UnreadView is one user's counts across channels, as Redis holds them.
type UnreadView struct {
	User     string
	Channels []ChannelView
	// CursorsComplete: the user's cursor hash is hydrated, so a channel
	// without a state has none. MembershipsComplete: the same for the
	// registers and the mention sets. When either is false, hydrate from
	// Postgres (Hydrate, HydrateMemberships) and read again.
	CursorsComplete, MembershipsComplete bool
	// MissingHeads lists the channels whose head Redis does not know.
	MissingHeads []string
}

// ErrTooManyChannels is Unread's answer for a user whose default channel
// set is larger than MaxUnreadChannels: read it from Postgres (which pages
// the first MaxUnreadChannels in channel order) or list the channels.
var ErrTooManyChannels = errors.New("more channels than one unread read covers")

// Unread reads one user's unread state across channels with plain
// pipelined reads, no script and a bounded number of round trips: the
// user's cursors and registers (HMGET of the listed channels; for the
// default set, every channel the user has a cursor or a register in, less
// the channels the user left, at most MaxUnreadChannels: HLEN, then
// HGETALL), the heads (one HGET per channel, in the first pipeline when
// the channels are listed), then the mention counts (ZLEXCOUNT above the
// effective read) of the channels with unread messages only: a mention is
// at or below its channel's head, so a channel read up to its head has
// none to count. Counts use the cap to tell "more than cap" (capped).
func (s *Store) Unread(ctx context.Context, user string, channels []string, mentionCap int) (UnreadView, error) {
	view := UnreadView{User: user}
	// Answer in channel order (what callers show).
	channels = slices.Clone(channels)
	slices.Sort(channels)
	var cursors, regs map[string]string
	var heads []*redis.StringCmd
	defaultSet := len(channels) == 0
	if defaultSet {
		var err error
		if channels, cursors, regs, err = s.userChannels(ctx, user); err != nil {
			return view, err
		}
		_, view.CursorsComplete = cursors[loadedField]
		_, view.MembershipsComplete = regs[loadedField]
		if len(channels) == 0 {
			return view, nil // the markers alone say whether that is the truth
		}
		heads = make([]*redis.StringCmd, len(channels))
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			for i, ch := range channels {
				heads[i] = pipe.HGet(ctx, s.ChannelKey(ch), headField)
			}
		}); err != nil {
			return view, err
		}
	} else {
		fields := make([]string, 0, len(channels)+1)
		fields = append(append(fields, channels...), loadedField)
		var ucmd, mcmd *redis.SliceCmd
		heads = make([]*redis.StringCmd, len(channels))
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			ucmd = pipe.HMGet(ctx, s.UserKey(user), fields...)
			mcmd = pipe.HMGet(ctx, s.UserMembersKey(user), fields...)
			for i, ch := range channels {
				heads[i] = pipe.HGet(ctx, s.ChannelKey(ch), headField)
			}
		}); err != nil {
			return view, err
		}
		uv, uerr := ucmd.Result()
		mv, merr := mcmd.Result()
		if err := errors.Join(uerr, merr); err != nil {
			return view, fmt.Errorf("%w: reading the unread state of %s: %w", ErrUnavailable, user, err)
		}
		cursors, regs = hmgetMap(channels, uv), hmgetMap(channels, mv)
		view.CursorsComplete, view.MembershipsComplete = uv[len(channels)] != nil, mv[len(channels)] != nil
	}
	view.Channels = make([]ChannelView, 0, len(channels))
	var unread []int // indexes into view.Channels with messages to count mentions in
	for i, ch := range channels {
		cv := ChannelView{Channel: ch}
		k := receipt.Key{User: user, Channel: ch}
		var err error
		cv.State = receipt.State{Key: k}
		if v, ok := cursors[ch]; ok {
			if st, err := decodeValue(k, v); err != nil {
				s.skipUndecodable() // read as no state, never failing the user
			} else {
				cv.State, cv.HasState = st, true
			}
		}
		if v, ok := regs[ch]; ok {
			if cv.Membership, err = decodeRegister(k, v); err != nil {
				return view, err
			}
			cv.HasMembership = true
		}
		if defaultSet && cv.HasMembership && !cv.Membership.Member {
			continue // left: the channel no longer counts
		}
		hv, herr := heads[i].Result()
		switch {
		case errors.Is(herr, redis.Nil):
			view.MissingHeads = append(view.MissingHeads, ch)
		case herr != nil:
			return view, fmt.Errorf("%w: %w", ErrUnavailable, herr)
		default:
			if cv.Head, err = decodeHead(ch, hv); err != nil {
				return view, err
			}
			cv.HeadKnown = true
		}
		cv.Unread, cv.FirstUnread = channel.Unread(cv.Head.Seq, cv.State)
		if cv.Unread > 0 {
			unread = append(unread, len(view.Channels))
		}
		view.Channels = append(view.Channels, cv)
	}
	if len(unread) == 0 {
		return view, nil
	}
	counts := make([]*redis.IntCmd, len(unread))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for j, i := range unread {
			cv := &view.Channels[i]
			counts[j] = pipe.ZLexCount(ctx, s.MentionsKey(cv.State.Key), "("+padSeq(cv.State.EffectiveRead().Seq), "+")
		}
	}); err != nil {
		return view, err
	}
	for j, i := range unread {
		n, err := counts[j].Result()
		if err != nil {
			return view, fmt.Errorf("%w: counting the mentions of %s: %w", ErrUnavailable, user, err)
		}
		view.Channels[i].Mentions, view.Channels[i].MentionsCapped = n, n > int64(mentionCap)
	}
	return view, nil
}

// userChannels reads a user's default channel set: every field of the
// user's cursor and membership hashes (the markers included), after
// checking that they are within MaxUnreadChannels. The channels come in
// the hashes' order, each once.
func (s *Store) userChannels(ctx context.Context, user string) (channels []string, cursors, regs map[string]string, err error) {
	var ulen, mlen *redis.IntCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ulen = pipe.HLen(ctx, s.UserKey(user))
		mlen = pipe.HLen(ctx, s.UserMembersKey(user))
	}); err != nil {
		return nil, nil, nil, err
	}
	// Each hash holds at most two marker fields.
	if n := max(ulen.Val(), mlen.Val()) - 2; n > MaxUnreadChannels {
		return nil, nil, nil, fmt.Errorf("%w: user %s has about %d (at most %d)", ErrTooManyChannels, user, n, MaxUnreadChannels)
	}
	var ucmd, mcmd *redis.MapStringStringCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ucmd = pipe.HGetAll(ctx, s.UserKey(user))
		mcmd = pipe.HGetAll(ctx, s.UserMembersKey(user))
	}); err != nil {
		return nil, nil, nil, err
	}
	cursors, regs = ucmd.Val(), mcmd.Val()
	channels = make([]string, 0, max(len(cursors), len(regs)))
	for f := range cursors {
		if !strings.HasPrefix(f, ":") {
			channels = append(channels, f)
		}
	}
	for f := range regs {
		if _, dup := cursors[f]; !dup && !strings.HasPrefix(f, ":") {
			channels = append(channels, f)
		}
	}
	if len(channels) > MaxUnreadChannels {
		return nil, nil, nil, fmt.Errorf("%w: user %s has %d (at most %d)", ErrTooManyChannels, user, len(channels), MaxUnreadChannels)
	}
	slices.Sort(channels)
	return channels, cursors, regs, nil
}

// hmgetMap is an HMGET's answer for fields as a map of the fields found.
func hmgetMap(fields []string, vals []any) map[string]string {
	out := make(map[string]string, len(fields))
	for i, f := range fields {
		if v, ok := vals[i].(string); ok {
			out[f] = v
		}
	}
	return out
}
