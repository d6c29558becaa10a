package unread

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// line is what a channel view answers, at every level.
type line struct {
	Channel                   string
	Head                      int64
	Member, HasMembership     bool
	Read                      receipt.Position
	AtAll, AtMentions, AtNone Counts
	AtMuted                   Counts
}

func lines(vs []ChannelView) []line {
	out := make([]line, len(vs))
	for i := range vs {
		v := &vs[i]
		out[i] = line{Channel: v.Channel, Head: v.Head.Seq, Member: v.Membership.Member, HasMembership: v.HasMembership,
			Read: v.State.EffectiveRead(), AtAll: v.At(notification.All, false), AtMentions: v.At(notification.Mentions, false),
			AtNone: v.At(notification.None, false), AtMuted: v.At(notification.All, true)}
	}
	return out
}

// The Redis read and the Postgres fallback give the same answers for the
// same data: random users' cursors (public and private), registers
// (member, left, none), mentions, channels' heads (some with none), group
// mentions (the user's own among them) and deletions, written to both
// stores by their kinds, read as the default set and as listed channels,
// in one pipeline and in parts, at every level.
func TestRedisAndPostgresAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rs := kindtest.Redis(t, testScripts...)
	const mentionCap = 3
	view := NewStore(pg, rs).WithMentionCap(mentionCap)
	rnd := rand.New(rand.NewPCG(5, 8))
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	var channels []string
	var heads []channel.Head
	var noHead []string
	var gms []channel.GroupMentions
	var dels []channel.Deletions
	for i := range 10 {
		ch := fmt.Sprintf("c%d", i)
		channels = append(channels, ch)
		if i == 9 {
			noHead = append(noHead, ch) // a channel without messages
			continue
		}
		head := int64(1 + rnd.IntN(20))
		heads = append(heads, channel.Head{Channel: ch, Seq: head, MessageID: fmt.Sprintf("m%d", head), UpdatedAtUnixMs: 1})
		g := channel.GroupMentions{Channel: ch}
		for range rnd.IntN(6) {
			g.Mentions = append(g.Mentions, channel.GroupMention{Seq: 1 + rnd.Int64N(head), Sender: users[rnd.IntN(len(users))]})
		}
		g.Mentions = channel.MergeGroupMentions(nil, g.Mentions, mentionCap)
		gms = append(gms, g)
		var d []int64
		for range rnd.IntN(5) {
			d = append(d, 1+rnd.Int64N(head))
		}
		if d = channel.SettleDeletions(d); len(d) > 0 {
			dels = append(dels, channel.Deletions{Channel: ch, Seqs: d})
		}
	}
	headOf := map[string]int64{}
	for _, h := range heads {
		headOf[h.Channel] = h.Seq
	}
	_, err := headkind.NewStore(pg, nil).WritePG(ctx, heads)
	require.NoError(t, err)
	require.NoError(t, headkind.NewStore(nil, rs).HydrateRedis(ctx, heads, noHead))
	allGroups := make([]channel.GroupMentions, len(channels))
	for i, ch := range channels {
		allGroups[i] = channel.GroupMentions{Channel: ch}
		for _, g := range gms {
			if g.Channel == ch {
				allGroups[i] = g
			}
		}
	}
	_, err = groupmentions.NewStore(pg, nil).WritePG(ctx, gms)
	require.NoError(t, err)
	require.NoError(t, groupmentions.NewStore(nil, rs).WithMentionCap(mentionCap).HydrateRedis(ctx, allGroups))
	_, err = deletions.NewStore(pg, nil).WritePG(ctx, dels)
	require.NoError(t, err)
	require.NoError(t, deletions.NewStore(nil, rs).HydrateRedis(ctx, channelRefs(channels...), dels))

	for _, u := range users {
		var states []receipt.State
		var regs []channel.Membership
		var ms []channel.Mentions
		for _, ch := range channels {
			k := receipt.Key{User: u, Channel: ch}
			head := headOf[ch]
			if head > 0 && rnd.IntN(4) > 0 { // a read of nothing is stored in neither
				st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 1 + rnd.Int64N(head)}, MessageID: "m"}, UpdatedAtUnixMs: 1}
				if rnd.IntN(3) == 0 {
					st.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: rnd.Int64N(head + 1)}}
				}
				states = append(states, st)
			}
			switch rnd.IntN(3) {
			case 0:
				regs = append(regs, channel.Join(k, 1, 1, 0))
			case 1:
				regs = append(regs, channel.Leave(k, 1, 1))
			}
			if head > 0 && rnd.IntN(2) == 0 {
				var seqs []int64
				for range 1 + rnd.IntN(6) {
					seqs = append(seqs, 1+rnd.Int64N(head))
				}
				ms = append(ms, channel.Mentions{Key: k, Seqs: channel.MergeMentions(nil, seqs, mentionCap)})
			}
		}
		_, err := cursors.NewPostgres(pg).Upsert(ctx, states)
		require.NoError(t, err)
		_, err = members.NewStore(pg, nil).WritePG(ctx, regs)
		require.NoError(t, err)
		_, err = mentions.NewStore(pg, nil).WritePG(ctx, ms)
		require.NoError(t, err)
		require.NoError(t, cursors.NewStore(rs).Hydrate(ctx, u, states, redisstore.Incarnation{}))
		require.NoError(t, mentions.NewStore(nil, rs).WithMentionCap(mentionCap).HydrateRedis(ctx, u, ms))
		require.NoError(t, members.NewStore(nil, rs).HydrateMemberships(ctx, u, regs))
	}

	listed := []string{"c7", "c0", "c9", "c3", "nowhere"}
	for _, u := range users {
		for _, chunk := range []int{ChunkDefault, 2} {
			v := view.WithChunk(chunk)
			for _, chs := range [][]string{nil, listed} {
				name := fmt.Sprintf("%s/chunk=%d/listed=%v", u, chunk, chs != nil)
				got, err := v.Read(ctx, u, chs)
				require.NoError(t, err, name)
				require.True(t, got.CursorsComplete && got.MembershipsComplete, name)
				wantMissing := []string(nil) // a listed channel Redis knows nothing of
				if chs != nil {
					wantMissing = []string{"nowhere"}
				}
				require.Equal(t, wantMissing, got.MissingHeads, name)
				require.Equal(t, wantMissing, got.MissingDeletions, name)
				require.Equal(t, wantMissing, got.MissingGroupMentions, name)
				durable, err := view.ReadPG(ctx, u, chs)
				require.NoError(t, err, name)
				require.Equal(t, lines(durable), lines(got.Channels), name)
			}
		}
	}
	// The data reached every part of the rule somewhere.
	var unread, mentioned, grouped, deleted bool
	for _, u := range users {
		vs, err := view.ReadPG(ctx, u, nil)
		require.NoError(t, err)
		for _, v := range vs {
			unread = unread || v.Unread > 0
			mentioned = mentioned || v.Mentions > 0
			grouped = grouped || v.At(notification.All, false).Mentions > v.Mentions
			deleted = deleted || (v.Deletions.Known && v.Deletions.Deleted > 0)
		}
	}
	require.True(t, unread && mentioned && grouped && deleted, "unread %v, mentioned %v, grouped %v, deleted %v", unread, mentioned, grouped, deleted)
	require.True(t, slices.IsSorted(channels))
}
