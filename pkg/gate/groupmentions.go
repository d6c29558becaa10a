package gate

// Group mentions (a notice's mention_all): stored once per channel, they
// count as a mention for every member but the sender whose level is all
// or mentions.

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
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
