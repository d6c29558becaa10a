package gate

// Group mentions (a notice's mention_all): stored once per channel, they
// count as a mention for every member but the sender whose level is all
// or mentions.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/views/unread"
)

// countsGroupMentions says whether a channel's group mentions count for
// a user at an effective level (the unread view's rule).
func countsGroupMentions(l notification.Level) bool { return unread.CountsGroupMentions(l) }

// groupMentionStore is the group mention kind's storage on the gate's
// stores.
func (g *Gate) groupMentionStore() groupmentions.Store { return groupmentions.NewStore(g.pg, g.redis) }

// hydrateGroupMentions copies the group mentions of channels from
// Postgres into Redis (a channel without any is recorded as such).
func (g *Gate) hydrateGroupMentions(ctx context.Context, channels []string, hydrate func(string, func(context.Context) error)) error {
	if err := g.settled(ctx, nil, channels); err != nil {
		return err
	}
	rows, err := g.groupMentionStore().ReadPG(ctx, channels, g.cfg.MentionCap)
	if err != nil {
		return fmt.Errorf("reading the group mentions of %d channels: %w", len(channels), err)
	}
	byCh := make(map[string][]channel.GroupMention, len(rows))
	for _, r := range rows {
		byCh[r.Channel] = r.Mentions
	}
	all := make([]channel.GroupMentions, len(channels))
	for i, ch := range channels {
		all[i] = channel.GroupMentions{Channel: ch, Mentions: byCh[ch]}
	}
	hydrate("group mentions", func(c context.Context) error { return g.groupMentionStore().HydrateRedis(c, all, g.cfg.MentionCap) })
	return nil
}

// groupMentionsOf is the group mentions of notices, one entry per
// channel in first-seen order, each merged (one per seq, the newest
// cap+1: older ones would be trimmed at once).
func groupMentionsOf(notices []notice, mentionCap int) []channel.GroupMentions {
	var out []channel.GroupMentions
	at := map[string]int{}
	for _, n := range notices {
		if !n.mentionAll {
			continue
		}
		i, ok := at[n.channel]
		if !ok {
			i = len(out)
			at[n.channel] = i
			out = append(out, channel.GroupMentions{Channel: n.channel})
		}
		out[i].Mentions = append(out[i].Mentions, channel.GroupMention{Seq: n.seq, Sender: n.sender})
	}
	for i := range out {
		out[i].Mentions = channel.MergeGroupMentions(nil, out[i].Mentions, mentionCap)
	}
	return out
}

// addGroupMentions writes group mentions to Redis; a failure is logged
// and counted (the notices report realtime_degraded).
func (g *Gate) addGroupMentions(ctx context.Context, groups []channel.GroupMentions) error {
	err := g.groupMentionStore().AddRedis(ctx, groups, g.cfg.MentionCap)
	if err != nil {
		g.redisDegradedOn(ctx, redisOpMerge, 1, err)
	}
	return err
}

// groupMentionRecords adds the channel events carrying group mentions,
// each with its channel's head (at most channel.MaxGroupMentionsPerEvent
// an event: the event stays under its size bound).
func groupMentionRecords(top map[string]channel.Head, groups []channel.GroupMentions, add func(*kgo.Record, error) error) error {
	for _, gm := range groups {
		for ms := gm.Mentions; len(ms) > 0; {
			part := ms[:min(len(ms), channel.MaxGroupMentionsPerEvent)]
			ms = ms[len(part):]
			if err := add(event.EncodeHeadWithGroupMentions(top[gm.Channel], part)); err != nil {
				return err
			}
		}
	}
	return nil
}
