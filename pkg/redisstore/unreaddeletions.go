package redisstore

// The unread view's read of a channel's deletions: the set
// del:{channel} of the deletion kind (pkg/kinds/deletions, which owns
// its layout, writes and hydrates it and counts a thread's), counted
// here for the channels whose count (the channel value's fourth part,
// read with the heads) says they have some and that have unread
// messages. It moves out with the views.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

// deletionsKey is the key of a channel's deleted-seq set: the kind's
// (deletions.Store.RedisKey), which the view reads.
func (s *Store) deletionsKey(ch string) string { return s.prefix + "del:{" + ch + "}" }

// countDeletionsScript is how deletions change one user's counts in a
// channel: KEYS[1] = the channel's set; ARGV and the answer are
// seqrun's ({-1}: the set is gone while the count says it had some,
// hydrate).
var countDeletionsScript = redis.NewScript(LuaSeqRun + "return seqrun(KEYS[1])\n")

// deletionPass collects, during an unread read, the channels whose counts
// deletions may change, and those whose deletions Redis does not know.
type deletionPass struct {
	pending []pendingDeletion
	missing []string
}

type pendingDeletion struct {
	view     int // index in the views
	mentions string
}

// note reads a channel's deletion count: "", the channel's deletions are
// unknown; above 0 with unread messages, they are counted after.
func (p *deletionPass) note(views []ChannelView, d string, mentions string) {
	cv := &views[len(views)-1]
	switch {
	case d == "":
		p.missing = append(p.missing, cv.Channel)
	case d != "0" && cv.Unread > 0:
		p.pending = append(p.pending, pendingDeletion{view: len(views) - 1, mentions: mentions})
	}
}

// applyDeletions counts the pending channels' deletions (one script each, in one
// pipeline) into views.
func (s *Store) applyDeletions(ctx context.Context, views []ChannelView, p *deletionPass, mentionCap int) error {
	if len(p.pending) == 0 {
		return nil
	}
	cmds := make([]*redis.Cmd, len(p.pending))
	owns := make([]map[int64]bool, len(p.pending))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, pd := range p.pending {
			cv := &views[pd.view]
			read := cv.State.EffectiveRead().Seq
			args := []any{read, cv.Head.Seq}
			own := map[int64]bool{}
			for m := range strings.FieldsSeq(pd.mentions) {
				if q, err := parsePadded(m); err == nil && q > read {
					args, own[q] = append(args, q), true
				}
			}
			for _, q := range cv.groupSeqs { // asked once, counted in groupMentions
				if q > read && !own[q] {
					args = append(args, q)
				}
			}
			owns[i] = own
			cmds[i] = countDeletionsScript.EvalSha(ctx, pipe, []string{s.deletionsKey(cv.Channel)}, args...)
		}
	}); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for i, pd := range p.pending {
		cv := &views[pd.view]
		res, err := cmds[i].Slice()
		if err != nil {
			return fmt.Errorf("%w: counting the deletions of %s: %w", ErrUnavailable, cv.Channel, err)
		}
		if n, _ := res[0].(int64); n < 0 || len(res) < 2 {
			p.missing = append(p.missing, cv.Channel)
			continue
		}
		n, _ := res[0].(int64)
		fs, _ := res[1].(string)
		first, _ := strconv.ParseInt(fs, 10, 64)
		cv.Unread, cv.FirstUnread = channel.AfterDeletions(cv.Unread, first, n)
		var ownDeleted int64
		for _, r := range res[2:] {
			if q, err := strconv.ParseInt(fmt.Sprint(r), 10, 64); err == nil && owns[i][q] {
				ownDeleted++
			}
		}
		cv.Mentions = max(0, cv.Mentions-ownDeleted)
		cv.MentionsCapped = cv.Mentions > int64(mentionCap)
		if cv.hasGroupMentions {
			cv.groupMentions = max(0, cv.groupMentions-int64(len(res)-2))
			cv.groupMentionsCapped = cv.groupMentions > int64(mentionCap)
		}
	}
	return nil
}
