package kinds_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

func randomKey(r *rand.Rand) receipt.Key {
	return receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c" + strconv.Itoa(r.IntN(2))}
}

// inFolder reports the kinds in a folder of their own whose tests run
// the same suite (kindtest.StoresAgree) on their own values: a folder
// below pkg/kinds whose Go names the kind (Name: "<table>") and whose
// tests call the suite.
func inFolder(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	specs, err := filepath.Glob("*/*.go")
	require.NoError(t, err)
	for _, f := range specs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		tests, err := filepath.Glob(filepath.Join(filepath.Dir(f), "*_test.go"))
		require.NoError(t, err)
		suite := false
		for _, tf := range tests {
			tb, err := os.ReadFile(tf)
			require.NoError(t, err)
			suite = suite || strings.Contains(string(tb), "kindtest.StoresAgree(")
		}
		for _, m := range regexp.MustCompile(`Name:\s+"([a-z_]+)"`).FindAllStringSubmatch(string(b), -1) {
			if suite {
				out[m[1]] = true
			}
		}
	}
	return out
}

// Every kind's merge rule obeys the merge laws and holds in Go (the
// domain floor), in Postgres (SQL) and in Redis (Lua) alike: the same
// random histories, written in random batches, leave each store holding
// the Go fold of each key's values, in every copy Redis keeps
// (kindtest.StoresAgree).
func TestEveryKindMergesAlikeInEveryStore(t *testing.T) {
	t.Parallel()
	own := inFolder(t)
	require.True(t, own[kinds.Notifications.Name()], "the folders' suites are found")
	for _, k := range kinds.All() {
		if own[k.Name()] && randomValue[k.Name()] == nil {
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
