package unread

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A channel's group mentions count in the unread read for every user but
// their sender, with the user's own mentions once each, above the read
// and capped; unknown (never hydrated, or the set lost) they are
// reported missing, in the one pipeline read and the chunked one alike.
func TestUnreadCountsGroupMentions(t *testing.T) {
	t.Parallel()
	for name, chunk := range map[string]int{"one pipeline": ChunkDefault, "chunked": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			view, s, rdb := newTestStore(t)
			view = view.WithChunk(chunk)
			gm := groupmentions.NewStore(nil, s)
			ctx := context.Background()
			_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: "c", Seq: 10, UpdatedAtUnixMs: 1}, {Channel: "d", Seq: 4, UpdatedAtUnixMs: 1}})
			require.NoError(t, err)
			for _, ch := range []string{"c", "d"} {
				st := receipt.State{Key: receipt.Key{User: "u", Channel: ch}, Read: receipt.Cursor{Position: receipt.Position{Seq: 2}}, UpdatedAtUnixMs: 1}
				require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "u", []receipt.State{st}, redisstore.Incarnation{}))
				_, err = cursors.NewStore(s).Merge(ctx, []receipt.State{st})
				require.NoError(t, err)
			}
			require.NoError(t, mentions.NewStore(nil, s).HydrateRedis(ctx, "u", []channel.Mentions{{Key: receipt.Key{User: "u", Channel: "c"}, Seqs: []int64{3, 5}}}))
			require.NoError(t, members.NewStore(nil, s).HydrateMemberships(ctx, "u", nil))
			gms := []channel.GroupMention{{Seq: 1, Sender: "v"}, {Seq: 4, Sender: "v"}, {Seq: 5, Sender: "x"}, {Seq: 6, Sender: "u"}, {Seq: 7}}
			require.NoError(t, gm.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: gms}}))

			read := func(mentionCap int, channels ...string) (UnreadView, map[string]ChannelView) {
				t.Helper()
				var v UnreadView
				var err error
				if len(channels) == 0 {
					v, err = view.WithMentionCap(mentionCap).ReadPage(ctx, "u", Page{})
				} else {
					v, err = view.WithMentionCap(mentionCap).Read(ctx, "u", channels)
				}
				require.NoError(t, err)
				out := map[string]ChannelView{}
				for _, cv := range v.Channels {
					out[cv.Channel] = cv
				}
				return v, out
			}
			v, _ := read(100)
			require.ElementsMatch(t, []string{"c", "d"}, v.MissingGroupMentions, "a write does not make a channel known")

			require.NoError(t, gm.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c"}, {Channel: "d"}}))
			for _, listed := range [][]string{nil, {"c", "d"}} {
				v, byCh := read(100, listed...)
				require.Empty(t, v.MissingGroupMentions)
				c := byCh["c"]
				n, capped := c.MentionsAt(false)
				require.Equal(t, int64(2), n, "3 and 5, named")
				require.False(t, capped)
				n, _ = c.MentionsAt(true)
				require.Equal(t, int64(4), n, "3, 4, 5 (named and group) and 7; 1 is read, 6 is the user's own")
				d := byCh["d"]
				n, _ = d.MentionsAt(true)
				require.Zero(t, n, "a channel without group mentions")
			}
			_, byCh := read(2, "c")
			c := byCh["c"]
			n, capped := c.MentionsAt(true)
			require.Equal(t, int64(3), n, "cap+1")
			require.True(t, capped)

			// The set lost, its top still in the channel's hash: missing.
			require.NoError(t, rdb.Del(ctx, gm.RedisKey("c")).Err())
			v, _ = read(100, "c")
			require.Equal(t, []string{"c"}, v.MissingGroupMentions)
			require.NoError(t, gm.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: gms[2:]}}))
			v, byCh = read(100, "c")
			require.Empty(t, v.MissingGroupMentions)
			c = byCh["c"]
			n, _ = c.MentionsAt(true)
			require.Equal(t, int64(3), n, "3, 5 and 7 once hydrated again")
		})
	}
}
