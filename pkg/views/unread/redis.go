package unread

// A user's unread state across channels, read from Redis with plain
// pipelined commands (the bulk read behind GetUnread, ReadAll and the
// badge): the user's cursor, membership and mention hashes, the channel
// values (head, deletion count, group mention top: redisstore's
// ChannelValues), then, where they may change the counts, the channels'
// group mentions (groupmentions.go) and deletions (deletions.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Read reads one user's unread state across channels with plain
// pipelined reads, no script but the deletions' and a bounded number of
// round trips: the user's cursors, registers and mentions (HMGET of the
// listed channels; for the default set, every channel the user has a
// cursor or a register in, less the channels the user left, at most
// redisstore.MaxUnreadChannels: HLEN, then each hash whole: userHashes),
// and the channel values (in the first pipeline when the channels are
// listed; a big page's in parts read at once: readChunked). A channel's
// mention seqs are decoded only above its effective read and only where
// it has unread messages (Count counts none elsewhere). A stored field
// that does not decode is skipped and counted, never failing the user.
// The riders' reads go with the heads'.
func (s Store) Read(ctx context.Context, user string, channels []string, riders ...Rider) (UnreadView, error) {
	return s.read(ctx, user, channels, Page{}, riders)
}

// ReadPage is Read of a page of the user's default channel set: the
// user's hashes are read whole (they bound the set), the heads of the
// page's channels only.
func (s Store) ReadPage(ctx context.Context, user string, page Page, riders ...Rider) (UnreadView, error) {
	return s.read(ctx, user, nil, page, riders)
}

func (s Store) read(ctx context.Context, user string, channels []string, page Page, riders []Rider) (UnreadView, error) {
	view := UnreadView{User: user}
	// Answer in channel order (what callers show).
	channels = slices.Clone(channels)
	slices.Sort(channels)
	var cursors, regs, mentionTable fieldTable
	var heads *heads.ChannelValues
	defaultSet := len(channels) == 0
	if defaultSet {
		hs, err := s.userHashes(ctx, user)
		if err != nil {
			return view, err
		}
		cursors, regs = hs.cursors, hs.regs
		if channels, err = unionOf(user, cursors, regs); err != nil {
			return view, err
		}
		view.CursorsComplete = cursors.loaded
		channels, view.More = pageOf(channels, regs, user, page)
		if len(channels) > s.chunk {
			return s.readChunked(ctx, view, channels, hs, riders)
		}
		if mentionTable, err = hs.waitMentions(); err != nil {
			return view, err
		}
		view.MembershipsComplete = regs.loaded && mentionTable.loaded
		if len(channels) == 0 {
			return view, nil // the markers alone say whether that is the truth
		}
		if err := s.exec(ctx, func(pipe redis.Pipeliner) {
			queueRiders(ctx, pipe, riders, user, channels)
			heads = s.headStore().QueueChannelValues(ctx, pipe, channels)
		}); err != nil {
			return view, err
		}
	} else {
		fields := make([]string, 0, len(channels)+1)
		fields = append(append(fields, channels...), redisstore.LoadedField)
		var ucmd, mcmd, ncmd *redis.SliceCmd
		if err := s.exec(ctx, func(pipe redis.Pipeliner) {
			queueRiders(ctx, pipe, riders, user, channels)
			ucmd = pipe.HMGet(ctx, s.cursorStore().RedisKey(user), fields...)
			mcmd = pipe.HMGet(ctx, s.memberStore().UserMembersKey(user), fields...)
			ncmd = pipe.HMGet(ctx, s.mentionStore().RedisKey(user), fields...)
			heads = s.headStore().QueueChannelValues(ctx, pipe, channels)
		}); err != nil {
			return view, err
		}
		uv, uerr := ucmd.Result()
		mv, merr := mcmd.Result()
		nv, nerr := ncmd.Result()
		if err := errors.Join(uerr, merr, nerr); err != nil {
			return view, fmt.Errorf("%w: reading the unread state of %s: %w", redisstore.ErrUnavailable, user, err)
		}
		cursors, regs, mentionTable = hmgetTable(channels, uv), hmgetTable(channels, mv), hmgetTable(channels, nv)
		view.CursorsComplete, view.MembershipsComplete = cursors.loaded, regs.loaded && mentionTable.loaded
	}
	var err error
	view.Channels, view.MissingHeads, view.MissingDeletions, err = s.counted(ctx, make([]ChannelView, 0, len(channels)),
		view.MissingHeads, view.MissingDeletions, user, channels, heads, cursors, regs, mentionTable, defaultSet)
	if err == nil {
		view.MissingGroupMentions, err = s.readGroupMentions(ctx, view.Channels, channels, heads.Tops(len(channels)), view.MissingGroupMentions)
	}
	if err == nil {
		view.MissingDeletions, err = s.readDeletions(ctx, view.Channels, view.MissingDeletions)
	}
	for i := range view.Channels {
		view.Channels[i].count()
	}
	return view, err
}

// counted appends to views the inputs of channels (ascending) from their
// channel values and the user's tables, which are read from their
// current positions on, each view's Unread the head less the read (the
// group mention and deletion reads ask only where it is above 0);
// missing gets the channels whose head Redis does not know, undeleted
// those whose deletions it does not know, and the views whose deletions
// are to count (readDeletions) are marked so. defaultSet: a channel the user left is left out.
func (s Store) counted(ctx context.Context, views []ChannelView, missing, undeleted []string, user string, channels []string,
	heads *heads.ChannelValues, cursorTable, regs, mentionTable fieldTable, defaultSet bool,
) ([]ChannelView, []string, []string, error) {
	var bound [redisstore.SeqWidth]byte
	var seqs []int64 // the views' mention seqs, side by side
	for i, ch := range channels {
		var in Input
		k := receipt.Key{User: user, Channel: ch}
		in.State = receipt.State{Key: k}
		if v, ok := cursorTable.next(ch); ok {
			if st, err := cursors.DecodeValue(k, v); err != nil {
				s.redis.SkipUndecodable() // read as no state, never failing the user
			} else {
				in.State, in.HasState = st, true
			}
		}
		if v, ok := regs.next(ch); ok && regs.membersOnly {
			in.Membership, in.HasMembership = channel.Membership{Key: k, Member: true}, true
		} else if ok {
			if m, err := members.DecodeRegister(k, v); err != nil {
				s.redis.SkipUndecodable()
			} else {
				in.Membership, in.HasMembership = m, true
			}
		}
		if defaultSet && in.HasMembership && !in.Membership.Member {
			continue // left: the channel no longer counts
		}
		hv, known, herr := heads.Head(i)
		switch {
		case herr != nil:
			return views, missing, undeleted, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, herr)
		case !known:
			missing = append(missing, ch)
		default:
			if h, err := redisstore.DecodeHead(ch, hv); err != nil {
				s.redis.SkipUndecodable() // hydrated again from Postgres
				missing = append(missing, ch)
			} else {
				in.Head, in.HeadKnown = h, true
			}
		}
		v := ChannelView{Channel: ch, Input: in, mentionCap: s.mentionCap}
		v.Unread, _ = channel.Unread(in.Head.Seq, in.State)
		if raw, _ := mentionTable.next(ch); raw != "" && v.Unread > 0 {
			from := len(seqs)
			var err error
			if seqs, err = appendSeqsAbove(seqs, raw, redisstore.AppendPadded(bound[:0], in.State.EffectiveRead().Seq)); err != nil {
				s.redis.SkipUndecodable() // read as no mentions, never failing the user
				seqs = seqs[:from]
			}
			if len(seqs) > from {
				v.MentionSeqs = seqs[from:len(seqs):len(seqs)]
			}
		}
		switch d := heads.Deletions(i); {
		case d == "":
			undeleted = append(undeleted, ch)
		case d != "0" && v.Unread > 0:
			v.countDeletions = true
		}
		views = append(views, v)
	}
	return views, missing, undeleted, nil
}

// appendSeqsAbove appends to dst the members of a stored mention list
// above bound (a padded seq): byte order is numeric order, and the list
// is ascending, so they are its tail, found from the end without
// decoding the rest. The views of one read share dst (one allocation per
// many channels, not one per channel: at 10,000 channels with mentions
// those were a fifth of the read's allocations).
func appendSeqsAbove(dst []int64, v string, bound []byte) ([]int64, error) {
	start := len(v)
	for start > 0 {
		i := strings.LastIndexByte(v[:start], ' ')
		if v[i+1:start] <= string(bound) {
			break
		}
		start = max(i, 0)
	}
	return mentions.AppendSeqList(dst, v[start:])
}

func queueRiders(ctx context.Context, pipe redis.Pipeliner, riders []Rider, user string, channels []string) {
	for _, r := range riders {
		r.Queue(ctx, pipe, user, channels)
	}
}
