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
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/redisstore"
)

// countsGroupMentions says whether a channel's group mentions count for
// a user at an effective level: at all and mentions (muted or not), never
// at none.
func countsGroupMentions(l notification.Level) bool {
	return l == notification.All || l == notification.Mentions
}

// groupMentionStore is the group mention kind's storage on the gate's
// stores.
func (g *Gate) groupMentionStore() groupmentions.Store { return groupmentions.NewStore(g.PG, g.Redis) }

// hydrateGroupMentions copies the group mentions of channels from
// Postgres into Redis (a channel without any is recorded as such).
func (g *Gate) hydrateGroupMentions(ctx context.Context, channels []string, hydrate func(string, func(context.Context) error)) error {
	if err := g.Settled(ctx, nil, channels); err != nil {
		return err
	}
	rows, err := g.groupMentionStore().ReadPG(ctx, channels, g.Cfg.MentionCap)
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
	hydrate("group mentions", func(c context.Context) error { return g.groupMentionStore().HydrateRedis(c, all, g.Cfg.MentionCap) })
	return nil
}

// durableGroupMentions reads, for the views counted from Postgres, the
// group mention seqs above the user's read that count for the user, by
// channel, as the Redis read does: only channels with unread messages
// are read.
func (g *Gate) durableGroupMentions(ctx context.Context, user string, views []redisstore.ChannelView) (map[string][]int64, error) {
	var chs []string
	for _, v := range views {
		if v.Unread > 0 && (!v.HasMembership || v.Membership.Member) {
			chs = append(chs, v.Channel)
		}
	}
	if len(chs) == 0 {
		return nil, nil
	}
	rows, err := g.groupMentionStore().ReadPG(ctx, chs, g.Cfg.MentionCap)
	if err != nil {
		return nil, err
	}
	byCh := make(map[string][]channel.GroupMention, len(rows))
	for _, r := range rows {
		byCh[r.Channel] = r.Mentions
	}
	out := map[string][]int64{}
	for _, v := range views {
		if gms := byCh[v.Channel]; len(gms) > 0 {
			if group := channel.GroupMentionSeqsFor(gms, user, v.State.EffectiveRead().Seq); len(group) > 0 {
				out[v.Channel] = group
			}
		}
	}
	return out, nil
}

// groupMentionsOf is the group mentions of notices, one entry per
// channel in first-seen order, each merged (one per seq, the newest
// cap+1: older ones would be trimmed at once).
func groupMentionsOf(notices []seam.Notice, mentionCap int) []channel.GroupMentions {
	var out []channel.GroupMentions
	at := map[string]int{}
	for _, n := range notices {
		if !n.MentionAll {
			continue
		}
		i, ok := at[n.Channel]
		if !ok {
			i = len(out)
			at[n.Channel] = i
			out = append(out, channel.GroupMentions{Channel: n.Channel})
		}
		out[i].Mentions = append(out[i].Mentions, channel.GroupMention{Seq: n.Seq, Sender: n.Sender})
	}
	for i := range out {
		out[i].Mentions = channel.MergeGroupMentions(nil, out[i].Mentions, mentionCap)
	}
	return out
}

// addGroupMentions writes group mentions to Redis; a failure is logged
// and counted (the notices report realtime_degraded).
func (g *Gate) addGroupMentions(ctx context.Context, groups []channel.GroupMentions) error {
	err := g.groupMentionStore().AddRedis(ctx, groups, g.Cfg.MentionCap)
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpMerge, 1, err)
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
