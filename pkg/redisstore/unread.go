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
// user's cursors, registers and mentions (HMGET of the listed channels;
// for the default set, every channel the user has a cursor or a register
// in, less the channels the user left, at most MaxUnreadChannels: HLEN,
// then HGETALL), and the heads (one HGET per channel, in the first
// pipeline when the channels are listed). A channel's mentions are
// counted here, above its effective read, and only where it has unread
// messages: a mention is at or below its channel's head, so a channel
// read up to its head has none. Counts use the cap to tell "more than
// cap" (capped). A stored field that does not decode is skipped and
// counted, never failing the user.
func (s *Store) Unread(ctx context.Context, user string, channels []string, mentionCap int) (UnreadView, error) {
	view := UnreadView{User: user}
	// Answer in channel order (what callers show).
	channels = slices.Clone(channels)
	slices.Sort(channels)
	var cursors, regs, mentions map[string]string
	var heads []*redis.StringCmd
	defaultSet := len(channels) == 0
	if defaultSet {
		var err error
		if channels, cursors, regs, mentions, err = s.userChannels(ctx, user); err != nil {
			return view, err
		}
		_, view.CursorsComplete = cursors[loadedField]
		_, regsLoaded := regs[loadedField]
		_, mentionsLoaded := mentions[loadedField]
		view.MembershipsComplete = regsLoaded && mentionsLoaded
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
		var ucmd, mcmd, ncmd *redis.SliceCmd
		heads = make([]*redis.StringCmd, len(channels))
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			ucmd = pipe.HMGet(ctx, s.UserKey(user), fields...)
			mcmd = pipe.HMGet(ctx, s.UserMembersKey(user), fields...)
			ncmd = pipe.HMGet(ctx, s.UserMentionsKey(user), fields...)
			for i, ch := range channels {
				heads[i] = pipe.HGet(ctx, s.ChannelKey(ch), headField)
			}
		}); err != nil {
			return view, err
		}
		uv, uerr := ucmd.Result()
		mv, merr := mcmd.Result()
		nv, nerr := ncmd.Result()
		if err := errors.Join(uerr, merr, nerr); err != nil {
			return view, fmt.Errorf("%w: reading the unread state of %s: %w", ErrUnavailable, user, err)
		}
		cursors, regs, mentions = hmgetMap(channels, uv), hmgetMap(channels, mv), hmgetMap(channels, nv)
		view.CursorsComplete = uv[len(channels)] != nil
		view.MembershipsComplete = mv[len(channels)] != nil && nv[len(channels)] != nil
	}
	view.Channels = make([]ChannelView, 0, len(channels))
	for i, ch := range channels {
		cv := ChannelView{Channel: ch}
		k := receipt.Key{User: user, Channel: ch}
		cv.State = receipt.State{Key: k}
		if v, ok := cursors[ch]; ok {
			if st, err := decodeValue(k, v); err != nil {
				s.skipUndecodable() // read as no state, never failing the user
			} else {
				cv.State, cv.HasState = st, true
			}
		}
		if v, ok := regs[ch]; ok {
			if m, err := decodeRegister(k, v); err != nil {
				s.skipUndecodable()
			} else {
				cv.Membership, cv.HasMembership = m, true
			}
		}
		if defaultSet && cv.HasMembership && !cv.Membership.Member {
			continue // left: the channel no longer counts
		}
		switch hv, herr := heads[i].Result(); {
		case errors.Is(herr, redis.Nil):
			view.MissingHeads = append(view.MissingHeads, ch)
		case herr != nil:
			return view, fmt.Errorf("%w: %w", ErrUnavailable, herr)
		default:
			if h, err := decodeHead(ch, hv); err != nil {
				s.skipUndecodable() // hydrated again from Postgres
				view.MissingHeads = append(view.MissingHeads, ch)
			} else {
				cv.Head, cv.HeadKnown = h, true
			}
		}
		cv.Unread, cv.FirstUnread = channel.Unread(cv.Head.Seq, cv.State)
		if v := mentions[ch]; v != "" && cv.Unread > 0 {
			n := countMentionsAbove(v, padSeq(cv.State.EffectiveRead().Seq))
			cv.Mentions, cv.MentionsCapped = n, n > int64(mentionCap)
		}
		view.Channels = append(view.Channels, cv)
	}
	return view, nil
}

// userChannels reads a user's default channel set: every field of the
// user's cursor, membership and mention hashes (the markers included),
// after checking that they are within MaxUnreadChannels. The channels
// come sorted, each once. A user is mentioned only where a member, so
// the mention hash is no larger than the membership hash.
func (s *Store) userChannels(ctx context.Context, user string) (channels []string, cursors, regs, mentions map[string]string, err error) {
	var ulen, mlen *redis.IntCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ulen = pipe.HLen(ctx, s.UserKey(user))
		mlen = pipe.HLen(ctx, s.UserMembersKey(user))
	}); err != nil {
		return nil, nil, nil, nil, err
	}
	// Each hash holds at most two marker fields.
	if n := max(ulen.Val(), mlen.Val()) - 2; n > MaxUnreadChannels {
		return nil, nil, nil, nil, fmt.Errorf("%w: user %s has about %d (at most %d)", ErrTooManyChannels, user, n, MaxUnreadChannels)
	}
	var ucmd, mcmd, ncmd *redis.MapStringStringCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ucmd = pipe.HGetAll(ctx, s.UserKey(user))
		mcmd = pipe.HGetAll(ctx, s.UserMembersKey(user))
		ncmd = pipe.HGetAll(ctx, s.UserMentionsKey(user))
	}); err != nil {
		return nil, nil, nil, nil, err
	}
	cursors, regs, mentions = ucmd.Val(), mcmd.Val(), ncmd.Val()
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
		return nil, nil, nil, nil, fmt.Errorf("%w: user %s has %d (at most %d)", ErrTooManyChannels, user, len(channels), MaxUnreadChannels)
	}
	slices.Sort(channels)
	return channels, cursors, regs, mentions, nil
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
