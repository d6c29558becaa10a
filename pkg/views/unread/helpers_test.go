package unread

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// testScripts are the scripts of the kinds the view's tests write with.
var testScripts = slices.Concat(deletions.Scripts, groupmentions.Scripts, mentions.Scripts, notifications.Scripts)

// newTestStore is the view on a Redis key prefix of the test's own (no
// Postgres), that driver and its client.
func newTestStore(tb testing.TB) (Store, *redisstore.Store, redis.UniversalClient) {
	tb.Helper()
	rs := kindtest.Redis(tb, testScripts...)
	return NewStore(nil, rs), rs, rs.Client()
}

func channelRefs(chs ...string) []thread.Ref {
	refs := make([]thread.Ref, len(chs))
	for i, ch := range chs {
		refs[i].Channel = ch
	}
	return refs
}

// setupUnreadUser puts user in n channels as the gateway leaves them
// after a hydrate: cursors (read at 5), registers, 2 mentions (seqs 7
// and 9) per channel, each channel's head at 10 and its deletions known
// (none).
func setupUnreadUser(tb testing.TB, rs *redisstore.Store, user string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	channels := make([]string, n)
	states := make([]receipt.State, n)
	regs := make([]channel.Membership, n)
	ms := make([]channel.Mentions, n)
	heads := make([]channel.Head, n)
	for i := range channels {
		ch := fmt.Sprintf("%s-ch-%05d", user, i)
		channels[i] = ch
		k := receipt.Key{User: user, Channel: ch}
		states[i] = receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 5}, MessageID: "m5"}, UpdatedAtUnixMs: now}
		regs[i] = channel.Join(k, 1, now, 0)
		ms[i] = channel.Mentions{Key: k, Seqs: []int64{7, 9}}
		heads[i] = channel.Head{Channel: ch, Seq: 10, MessageID: "m10", UpdatedAtUnixMs: now}
	}
	require.NoError(tb, cursors.NewStore(rs).Hydrate(ctx, user, states, redisstore.Incarnation{}))
	require.NoError(tb, mentions.NewStore(nil, rs).HydrateRedis(ctx, user, ms))
	require.NoError(tb, members.NewStore(nil, rs).HydrateMemberships(ctx, user, regs))
	for start := 0; start < n; start += 1000 {
		_, err := headkind.NewStore(nil, rs).RaiseRedis(ctx, heads[start:min(start+1000, n)])
		require.NoError(tb, err)
		require.NoError(tb, deletions.NewStore(nil, rs).HydrateRedis(ctx, channelRefs(channels[start:min(start+1000, n)]...), nil))
	}
	return channels
}

// putDeletions adds seqs to each channel's deletion set, its count known
// (none: the channels are known to have no deletions).
func putDeletions(tb testing.TB, rs *redisstore.Store, seqs []int64, channels ...string) {
	tb.Helper()
	ds := make([]channel.Deletions, 0, len(channels))
	for _, ch := range channels {
		if len(seqs) > 0 {
			ds = append(ds, channel.Deletions{Channel: ch, Seqs: seqs})
		}
	}
	require.NoError(tb, deletions.NewStore(nil, rs).HydrateRedis(context.Background(), channelRefs(channels...), ds))
}
