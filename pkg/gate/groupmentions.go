package gate

// Group mentions (a notice's mention_all): stored once per channel, they
// count as a mention for every member but the sender whose level is all
// or mentions.

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/views/unread"
)

// countsGroupMentions says whether a channel's group mentions count for
// a user at an effective level (the unread view's rule).
func countsGroupMentions(l notification.Level) bool { return unread.CountsGroupMentions(l) }

// hydrateGroupMentions copies the group mentions of channels from
// Postgres into Redis (a channel without any is recorded as such).
func (g *Gate) hydrateGroupMentions(ctx context.Context, channels []string, hydrate func(string, func(context.Context) error)) error {
	if err := g.Settled(ctx, nil, channels); err != nil {
		return err
	}
	rows, err := g.GroupMentionStore().ReadPG(ctx, channels)
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
	hydrate("group mentions", func(c context.Context) error { return g.GroupMentionStore().HydrateRedis(c, all) })
	return nil
}
