package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// levelSet is a notification register the noticer's model holds: the last
// acknowledged SetNotifications of a (user, channel). Each user's levels
// are set by one client only, in order, and a retried call writes the same
// level and mute again, so the last acknowledged call is the register's
// value whatever the faults did.
type levelSet struct {
	level notification.Level
	until int64
}

// setLevel sets a random level and mute on one of client i's users in a
// random channel, retried until acknowledged (for at most a minute after
// halt). It returns false when it gave up.
func (n *noticer) setLevel(cl receiptsv1connect.ReceiptServiceClient, i, clients int, rng *rand.Rand) bool {
	u := n.users[(i+clients*rng.IntN(max(len(n.users)/clients, 1)))%len(n.users)]
	k := receipt.Key{User: u, Channel: n.channels[rng.IntN(len(n.channels))]}
	l := notification.Level(rng.IntN(int(notification.None) + 1))
	var until int64
	switch r := rng.Float64(); {
	case r < 0.3: // muted for long
		until = time.Now().Add(time.Hour).UnixMilli()
	case r < 0.5: // a mute that ends during the run: the check sees it expired
		until = time.Now().Add(2 * time.Second).UnixMilli()
	}
	req := &receiptsv1.SetNotificationsRequest{UserId: k.User, ChannelId: k.Channel, Level: l.String(), MutedUntilUnixMs: until}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err := cl.SetNotifications(ctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			break
		}
		n.retries.Add(1)
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond) // a client's back-off between retries, not synchronisation
	}
	n.mu.Lock()
	n.levels[k] = levelSet{level: l, until: until}
	n.mu.Unlock()
	n.levelsAcked.Add(1)
	return true
}

// badge is a user's badge totals over the noticer's channels.
type badge struct{ unread, channels, mentions int64 }

// wantLevel is the model's effective level and mute of k at nowMs (no
// user default is ever set: unset counts as all).
func (n *noticer) wantLevel(k receipt.Key, nowMs int64) (notification.Level, bool) {
	ls := n.levels[k]
	return notification.Register{Level: ls.level, MutedUntilUnixMs: ls.until}.Effective(notification.Unset, nowMs)
}

// add counts one channel of the model into the badge by its level.
func (b *badge) add(l notification.Level, muted bool, unread, mentions int64) {
	inUnread, inMentions := notification.Counts(l, muted)
	if inUnread && unread > 0 {
		b.unread += unread
		b.channels++
	}
	if inMentions {
		b.mentions += mentions
	}
}

// levelProblem compares one channel's level and mute from the API with the
// model ("" when they agree).
func (n *noticer) levelProblem(k receipt.Key, c *receiptsv1.ChannelUnread, nowMs int64) string {
	l, muted := n.wantLevel(k, nowMs)
	if c.GetLevel() != l.String() || c.GetMuted() != muted || c.GetMutedUntilUnixMs() != n.levels[k].until {
		return fmt.Sprintf("%s: (level, muted, until) = (%s, %t, %d), model (%s, %t, %d)",
			k.KafkaKey(), c.GetLevel(), c.GetMuted(), c.GetMutedUntilUnixMs(), l, muted, n.levels[k].until)
	}
	return ""
}

// levelsBehind returns the acknowledged registers Postgres does not hold
// (its level or mute differ from the last acknowledged call's; the caller
// holds n.mu).
func (n *noticer) levelsBehind(ctx context.Context, store *pgstore.Store) ([]string, error) {
	var behind []string
	for _, u := range n.users {
		regs, err := notifications.NewStore(store, nil).ReadPG(ctx, u, n.channels)
		if err != nil {
			return nil, err
		}
		got := map[receipt.Key]levelSet{}
		for _, r := range regs {
			got[r.Key] = levelSet{level: r.Level, until: r.MutedUntilUnixMs}
		}
		for _, ch := range n.channels {
			k := receipt.Key{User: u, Channel: ch}
			if want, ok := n.levels[k]; ok && got[k] != want {
				behind = append(behind, fmt.Sprintf("%s: Postgres holds %+v, acknowledged %+v", k.KafkaKey(), got[k], want))
			}
		}
	}
	return behind, nil
}

// wantCounts is the model's unread and mention counts of k: the messages
// in (read, head] less the deleted ones, and the mentions above read that
// are not deleted: its own, and the group mentions of others unless its
// level is none (the noticer's channels track no members: a group mention
// mentions everyone). The caller holds n.mu.
func (n *noticer) wantCounts(k receipt.Key, read, head, nowMs int64) (unread, mentions int64) {
	del := n.deleted[k.Channel]
	unread = max(head-read, 0)
	for s := range del {
		if s > read && s <= head {
			unread--
		}
	}
	seen := map[int64]bool{}
	for s := range n.mentions[k] {
		if s > read && !del[s] {
			seen[s] = true
		}
	}
	if l, _ := n.wantLevel(k, nowMs); l != notification.None {
		for s, sender := range n.groups[k.Channel] {
			if s > read && !del[s] && sender != k.User {
				seen[s] = true
			}
		}
	}
	return unread, int64(len(seen))
}
