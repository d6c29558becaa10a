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
	// More: a page of the default set stopped short of its end.
	More bool
}

// Page bounds a read of a user's default channel set: the channels after
// After in channel order (all when empty), at most Limit (0: no bound
// but MaxUnreadChannels). Left channels do not count toward Limit.
type Page struct {
	After string
	Limit int
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
	return s.unread(ctx, user, channels, Page{}, mentionCap)
}

// UnreadPage is Unread of a page of the user's default channel set: the
// user's hashes are read whole (they bound the set), the heads of the
// page's channels only.
func (s *Store) UnreadPage(ctx context.Context, user string, page Page, mentionCap int) (UnreadView, error) {
	return s.unread(ctx, user, nil, page, mentionCap)
}

func (s *Store) unread(ctx context.Context, user string, channels []string, page Page, mentionCap int) (UnreadView, error) {
	view := UnreadView{User: user}
	// Answer in channel order (what callers show).
	channels = slices.Clone(channels)
	slices.Sort(channels)
	var cursors, regs, mentions fieldTable
	var heads []*redis.StringCmd
	defaultSet := len(channels) == 0
	if defaultSet {
		var err error
		if channels, cursors, regs, mentions, err = s.userChannels(ctx, user); err != nil {
			return view, err
		}
		view.CursorsComplete = cursors.loaded
		view.MembershipsComplete = regs.loaded && mentions.loaded
		channels, view.More = s.pageOf(channels, regs, user, page)
		if len(channels) == 0 {
			return view, nil // the markers alone say whether that is the truth
		}
		heads = make([]*redis.StringCmd, len(channels))
		keys := s.channelKeys(channels)
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			for i, k := range keys {
				heads[i] = pipe.HGet(ctx, k, headField)
			}
		}); err != nil {
			return view, err
		}
	} else {
		fields := make([]string, 0, len(channels)+1)
		fields = append(append(fields, channels...), loadedField)
		var ucmd, mcmd, ncmd *redis.SliceCmd
		heads = make([]*redis.StringCmd, len(channels))
		keys := s.channelKeys(channels)
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			ucmd = pipe.HMGet(ctx, s.UserKey(user), fields...)
			mcmd = pipe.HMGet(ctx, s.UserMembersKey(user), fields...)
			ncmd = pipe.HMGet(ctx, s.UserMentionsKey(user), fields...)
			for i, k := range keys {
				heads[i] = pipe.HGet(ctx, k, headField)
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
		cursors, regs, mentions = hmgetTable(channels, uv), hmgetTable(channels, mv), hmgetTable(channels, nv)
		view.CursorsComplete, view.MembershipsComplete = cursors.loaded, regs.loaded && mentions.loaded
	}
	view.Channels = make([]ChannelView, 0, len(channels))
	var bound [seqWidth]byte
	for i, ch := range channels {
		cv := ChannelView{Channel: ch}
		k := receipt.Key{User: user, Channel: ch}
		cv.State = receipt.State{Key: k}
		if v, ok := cursors.next(ch); ok {
			if st, err := decodeValue(k, v); err != nil {
				s.skipUndecodable() // read as no state, never failing the user
			} else {
				cv.State, cv.HasState = st, true
			}
		}
		if v, ok := regs.next(ch); ok {
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
		if v, _ := mentions.next(ch); v != "" && cv.Unread > 0 {
			n := countMentionsAbove(v, appendPadded(bound[:0], cv.State.EffectiveRead().Seq))
			cv.Mentions, cv.MentionsCapped = n, n > int64(mentionCap)
		}
		view.Channels = append(view.Channels, cv)
	}
	return view, nil
}

// userChannels reads a user's default channel set: every field of the
// user's cursor, membership and mention hashes (the markers apart),
// after checking that they are within MaxUnreadChannels. The channels
// come sorted, each once. A user is mentioned only where a member, so
// the mention hash is no larger than the membership hash. Each hash is
// read as HKEYS and HVALS in one transaction (the same order) into a
// sorted table, not a map: at 10,000 channels the maps' hashing and
// cache misses were a fifth of the call.
func (s *Store) userChannels(ctx context.Context, user string) (channels []string, cursors, regs, mentions fieldTable, err error) {
	var ulen, mlen *redis.IntCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ulen = pipe.HLen(ctx, s.UserKey(user))
		mlen = pipe.HLen(ctx, s.UserMembersKey(user))
	}); err != nil {
		return nil, cursors, regs, mentions, err
	}
	// Each hash holds at most two marker fields.
	if n := max(ulen.Val(), mlen.Val()) - 2; n > MaxUnreadChannels {
		return nil, cursors, regs, mentions, fmt.Errorf("%w: user %s has about %d (at most %d)", ErrTooManyChannels, user, n, MaxUnreadChannels)
	}
	keys := []string{s.UserKey(user), s.UserMembersKey(user), s.UserMentionsKey(user)}
	var fields, vals [3]*redis.StringSliceCmd
	if _, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, k := range keys {
			fields[i], vals[i] = pipe.HKeys(ctx, k), pipe.HVals(ctx, k)
		}
		return nil
	}); err != nil {
		return nil, cursors, regs, mentions, fmt.Errorf("%w: reading the channels of %s: %w", ErrUnavailable, user, err)
	}
	var tables [3]fieldTable
	for i := range tables {
		if tables[i], err = newFieldTable(fields[i].Val(), vals[i].Val()); err != nil {
			return nil, cursors, regs, mentions, fmt.Errorf("%w: reading the channels of %s: %w", ErrUnavailable, user, err)
		}
	}
	cursors, regs, mentions = tables[0], tables[1], tables[2]
	// The union of the cursors' and the registers' channels, in order.
	cs, rs := cursors.entries, regs.entries
	channels = make([]string, 0, max(len(cs), len(rs)))
	for i, j := 0, 0; i < len(cs) || j < len(rs); {
		switch {
		case j == len(rs) || (i < len(cs) && cs[i].field < rs[j].field):
			channels = append(channels, cs[i].field)
			i++
		case i == len(cs) || rs[j].field < cs[i].field:
			channels = append(channels, rs[j].field)
			j++
		default:
			channels = append(channels, cs[i].field)
			i, j = i+1, j+1
		}
	}
	if len(channels) > MaxUnreadChannels {
		return nil, cursors, regs, mentions, fmt.Errorf("%w: user %s has %d (at most %d)", ErrTooManyChannels, user, len(channels), MaxUnreadChannels)
	}
	return channels, cursors, regs, mentions, nil
}

// pageOf keeps the channels of page: after page.After, not left (a
// register that says so), at most page.Limit; more reports whether any
// was cut. regs is read with a copy of its position.
func (s *Store) pageOf(channels []string, regs fieldTable, user string, page Page) (kept []string, more bool) {
	if page.After != "" {
		i, _ := slices.BinarySearch(channels, page.After)
		if i < len(channels) && channels[i] == page.After {
			i++
		}
		channels = channels[i:]
	}
	kept = channels[:0]
	for _, ch := range channels {
		// Only a register starting "0" can say "left": others skip decoding.
		if v, ok := regs.next(ch); ok && strings.HasPrefix(v, "0") {
			if m, err := decodeRegister(receipt.Key{User: user, Channel: ch}, v); err == nil && !m.Member {
				continue
			}
		}
		if page.Limit > 0 && len(kept) == page.Limit {
			return kept, true
		}
		kept = append(kept, ch)
	}
	return kept, false
}

// fieldTable is a hash's fields (markers apart) and values, sorted by
// field, read in field order with next.
type fieldTable struct {
	entries []fieldValue
	// loaded: the hash holds the ":loaded" marker.
	loaded bool
	at     int // next's position
}

type fieldValue struct{ field, val string }

// newFieldTable sorts a hash's fields and values (HKEYS and HVALS). The
// pairs are sorted together, with a generic sort: sorting two parallel
// slices through sort.Interface cost twice as much.
func newFieldTable(fields, vals []string) (fieldTable, error) {
	if len(fields) != len(vals) {
		return fieldTable{}, fmt.Errorf("%d fields and %d values", len(fields), len(vals))
	}
	t := fieldTable{entries: make([]fieldValue, 0, len(fields))}
	for i, f := range fields {
		if strings.HasPrefix(f, ":") {
			t.loaded = t.loaded || f == loadedField
			continue
		}
		t.entries = append(t.entries, fieldValue{f, vals[i]})
	}
	slices.SortFunc(t.entries, func(a, b fieldValue) int { return strings.Compare(a.field, b.field) })
	return t, nil
}

// next returns the value of field f; the fields asked for must come in
// ascending order.
func (t *fieldTable) next(f string) (string, bool) {
	for t.at < len(t.entries) && t.entries[t.at].field < f {
		t.at++
	}
	if t.at < len(t.entries) && t.entries[t.at].field == f {
		return t.entries[t.at].val, true
	}
	return "", false
}

// hmgetTable is an HMGET's answer for fields (ascending) and then the
// ":loaded" marker, as a table.
func hmgetTable(fields []string, vals []any) fieldTable {
	t := fieldTable{loaded: vals[len(fields)] != nil}
	for i, f := range fields {
		if v, ok := vals[i].(string); ok {
			t.entries = append(t.entries, fieldValue{f, v})
		}
	}
	return t
}
