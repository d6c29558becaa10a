package kinds_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// randomValue draws a valid value of each kind not in a folder of its
// own, over a few keys so that values of one key meet. Such a kind
// without a generator fails the test: a new kind's rule must be checked
// in every store.
var randomValue = map[string]kindtest.Gen{
	kinds.Cursors.Name(): func(r *rand.Rand) any {
		cur := func(epoch bool) receipt.Cursor {
			if r.IntN(3) == 0 {
				return receipt.Cursor{}
			}
			seq := 1 + r.Int64N(40)
			c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
			if epoch {
				c.Position.Epoch = r.Int64N(3)
			}
			return c
		}
		if r.IntN(5) == 0 {
			// A mark-unread: a private read at the epoch after the one seen
			// (so reads of higher seqs and lower epochs meet it), with the
			// public read ordered by seq and the own position by epoch.
			st := receipt.MarkUnread(randomKey(r), 1+r.Int64N(40), r.Int64N(3))
			st.DeviceID, st.UpdatedAtUnixMs = "d", 1+r.Int64N(1e6)
			return st
		}
		st := receipt.State{Key: randomKey(r), Read: cur(true), Delivered: cur(false), DeviceID: "d", UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
		if p := cur(true); !p.Position.IsZero() {
			st.PrivateRead = receipt.Cursor{Position: p.Position}
		}
		if st.Read.Position.IsZero() && st.Delivered.Position.IsZero() && st.PrivateRead.Position.IsZero() {
			st.Delivered = receipt.Cursor{Position: receipt.Position{Seq: 1}, MessageID: "m1"}
		}
		st, _ = receipt.Merge(receipt.State{}, st) // as the gateway hands it on
		return st
	},
	kinds.Heads.Name(): func(r *rand.Rand) any {
		seq := 1 + r.Int64N(40)
		return channel.Head{Channel: "c" + strconv.Itoa(r.IntN(3)), Seq: seq, MessageID: "m" + strconv.FormatInt(seq, 10), UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
	},
	kinds.Members.Name(): func(r *rand.Rand) any {
		k, v, at := randomKey(r), 1+r.Int64N(20), 1+r.Int64N(1e6)
		if r.IntN(3) == 0 {
			return channel.Leave(k, v, at)
		}
		return channel.Join(k, v, at, r.Int64N(30))
	},
	kinds.ThreadHeads.Name(): func(r *rand.Rand) any {
		seq := 1 + r.Int64N(40)
		return thread.Head{Ref: randomRef(r), Seq: seq, MessageID: "m" + strconv.FormatInt(seq, 10), UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
	},
	kinds.ThreadStates.Name(): func(r *rand.Rand) any {
		k := randomKey(r)
		st := thread.State{Key: thread.Key{User: k.User, Ref: randomRef(r)}}
		// Each part of the register alone or together, so that a rule's
		// part never hides behind another's.
		parts := 1 + r.IntN(7)
		if parts&1 != 0 {
			// Delivered has no epoch (there is no mark-undelivered).
			cur := func(epoch bool) receipt.Cursor {
				seq := 1 + r.Int64N(40)
				c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
				if epoch {
					c.Position.Epoch = r.Int64N(3)
				}
				return c
			}
			c := receipt.State{Key: k, Delivered: cur(false), DeviceID: "d", UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
			if r.IntN(2) == 0 {
				c.Read = cur(true)
			}
			if r.IntN(3) == 0 {
				c.PrivateRead = receipt.Cursor{Position: cur(true).Position}
			}
			if r.IntN(4) == 0 { // a mark-unread
				c.PrivateRead = thread.MarkUnread(st.Key, 1+r.Int64N(40), r.Int64N(3)).Cursors.PrivateRead
			}
			st.Cursors, _ = receipt.Merge(receipt.State{}, c) // as the gateway hands it on
			st.Cursors.Key = receipt.Key{}
		}
		if parts&2 != 0 {
			st.Follow = thread.Follow{Following: r.IntN(2) == 0, VersionUnixMs: 1 + r.Int64N(5)}
		}
		if parts&4 != 0 {
			seqs := make([]int64, 1+r.IntN(3))
			for i := range seqs {
				seqs[i] = 1 + r.Int64N(30)
			}
			st.Mentions = channel.MergeMentions(nil, seqs, 1000)
		}
		return st
	},
	kinds.GroupMentions.Name(): func(r *rand.Rand) any {
		// Few seqs and senders whose byte order is not a collation's
		// ("B" < "a"), so that two senders of one seq meet.
		senders := []string{"", "B", "a", "a-b"}
		ms := make([]channel.GroupMention, 1+r.IntN(3))
		for i := range ms {
			ms[i] = channel.GroupMention{Seq: 1 + r.Int64N(12), Sender: senders[r.IntN(len(senders))]}
		}
		return channel.GroupMentions{Channel: "c" + strconv.Itoa(r.IntN(2)), Mentions: channel.MergeGroupMentions(nil, ms, 1000)}
	},
}

func randomRef(r *rand.Rand) thread.Ref {
	return thread.Ref{Channel: "c" + strconv.Itoa(r.IntN(2)), Root: 1 + r.Int64N(2)}
}

func randomKey(r *rand.Rand) receipt.Key {
	return receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c" + strconv.Itoa(r.IntN(2))}
}

// inFolder are the kinds in a folder of their own, whose tests run the
// same suite (kindtest) on their own values.
var inFolder = map[string]bool{kinds.Notifications.Name(): true, kinds.Deletions.Name(): true, kinds.Settings.Name(): true, kinds.Mentions.Name(): true}

// Every kind's merge rule obeys the merge laws and holds in Go (the
// domain floor), in Postgres (SQL) and in Redis (Lua) alike: the same
// random histories, written in random batches, leave each store holding
// the Go fold of each key's values, in every copy Redis keeps
// (kindtest.StoresAgree).
func TestEveryKindMergesAlikeInEveryStore(t *testing.T) {
	t.Parallel()
	for _, k := range kinds.All() {
		if inFolder[k.Name()] {
			continue
		}
		gen := randomValue[k.Name()]
		require.NotNil(t, gen, "no random values for kind %s", k.Name())
		t.Run(k.Name(), func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Client(t)
			rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
			// A small mention cap, so that the retention is part of the rule.
			env := &kind.Env{Postgres: pgtest.NewSchema(t).Store, Redis: rs, MentionCap: 3}
			kindtest.MergeLaws(t, k, env, gen)
			kindtest.StoresAgree(t, k, env, gen)
		})
	}
}
