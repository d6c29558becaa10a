package seam

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// trips counts round trips: a command or a pipeline each.
type trips struct{ n atomic.Int64 }

func (t *trips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (t *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { t.n.Add(1); return next(ctx, cmd) }
}

func (t *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { t.n.Add(1); return next(ctx, cmds) }
}

// The checks' facts are the membership kind's (members.Store.QueueFacts)
// with the channels' heads, read in one round trip, and with the marks'
// stored values (redisstore.Store.QueueMarkValues) still in one: the
// same facts either way.
func TestFactsInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx, members.Scripts...))
	g := &Core{Redis: rs}
	ms := g.MemberStore()

	_, err := headkind.NewStore(nil, rs).RaiseRedis(ctx, []channel.Head{{Channel: "c1", Seq: 30, MessageID: "m30", UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	join := channel.Join(receipt.Key{User: "u1", Channel: "c1"}, 1, 1, 1)
	left := channel.Leave(receipt.Key{User: "u2", Channel: "c1"}, 2, 2)
	require.NoError(t, ms.HydrateChannelMembers(ctx, "c1", []channel.Membership{join, left}, true))
	_, err = ms.MergeMemberships(ctx, []channel.Membership{join})
	require.NoError(t, err)
	keys := []receipt.Key{join.Key, left.Key, {User: "u3", Channel: "c1"}, {User: "u1", Channel: "c2"}, join.Key}

	hook := &trips{}
	rdb.AddHook(hook)
	before := hook.n.Load()
	chs, kfs, err := g.redisFacts(ctx, keys, true)
	require.NoError(t, err)
	require.Equal(t, int64(1), hook.n.Load()-before, "the facts in one round trip")
	require.Equal(t, map[string]*ChannelFacts{
		"c1": {Channel: "c1", Head: channel.Head{Channel: "c1", Seq: 30, MessageID: "m30", UpdatedAtUnixMs: 1}, HeadKnown: true,
			ChannelFacts: members.ChannelFacts{MembersComplete: true, Registered: true}},
		"c2": {Channel: "c2"},
	}, chs)
	require.Len(t, kfs, len(keys))
	require.Equal(t, members.KeyFacts{Key: join.Key, InChannel: &join, InUser: &join}, kfs[0])
	require.Equal(t, members.KeyFacts{Key: left.Key, InChannel: &left}, kfs[1], "hydrated into the channel's hash only")
	require.Equal(t, members.KeyFacts{Key: keys[2]}, kfs[2])
	require.Equal(t, members.KeyFacts{Key: keys[3]}, kfs[3])
	require.Equal(t, kfs[0], kfs[4])

	wantChs, wantKfs, err := g.redisFacts(ctx, keys, false)
	require.NoError(t, err)
	before = hook.n.Load()
	chs, kfs, vals, err := g.factsAndValues(ctx, keys)
	require.NoError(t, err)
	require.Equal(t, int64(1), hook.n.Load()-before, "the facts and the marks' values in one round trip")
	require.Equal(t, wantChs, chs)
	require.Equal(t, wantKfs, kfs)
	require.NotNil(t, vals)
}
