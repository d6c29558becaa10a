package persister_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
)

func encodeAny(t *testing.T, d event.Decoded) *kgo.Record {
	t.Helper()
	r, err := event.EncodeDecoded(d)
	require.NoError(t, err)
	return r
}

// backlogKinds is a backlog of every event kind, out of order and with
// duplicates, and what Postgres must end with.
type backlogKinds struct {
	recs      []*kgo.Record
	heads     map[string]int64
	members   map[receipt.Key]channel.Membership
	mentions  map[receipt.Key][]int64
	effective map[receipt.Key]receipt.Position
}

func backlog(t *testing.T, capN int) backlogKinds {
	k := backlogKinds{heads: map[string]int64{}, members: map[receipt.Key]channel.Membership{}, mentions: map[receipt.Key][]int64{}, effective: map[receipt.Key]receipt.Position{}}
	for c := range 5 {
		ch := fmt.Sprintf("ch%d", c)
		for _, seq := range []int64{7, 30, 12, 30, 29} { // out of order, duplicate
			k.recs = append(k.recs, encodeAny(t, event.Decoded{Channel: &channel.Head{Channel: ch, Seq: seq + int64(c), MessageID: fmt.Sprint("m", seq+int64(c))}}))
		}
		k.heads[ch] = 30 + int64(c)
		for u := range 4 {
			key := receipt.Key{User: fmt.Sprintf("u%d", u), Channel: ch}
			join := channel.Join(key, 5, 100, 5)
			leave := channel.Leave(key, 9, 200)
			priv := receipt.State{Key: key, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 5}}}
			// the leave first, then the older join (a late replay)
			k.recs = append(k.recs,
				encodeAny(t, event.Decoded{Key: key, Membership: &leave}),
				encodeAny(t, event.Decoded{Key: key, Membership: &join, Receipt: &priv}))
			k.members[key] = leave
			st := state(key.User, ch, 3, 3)
			k.recs = append(k.recs, encode(t, st))
			k.effective[key] = receipt.Position{Seq: 5}
			var seqs []int64
			for m := int64(1); m <= 8; m++ {
				k.recs = append(k.recs, encodeAny(t, event.Decoded{Key: key, Mentions: []int64{m * 3}}))
				seqs = append(seqs, m*3)
			}
			k.mentions[key] = channel.Retain(seqs, capN)
		}
	}
	return k
}

func (b *bundle) requireKinds(want backlogKinds, capN int) {
	b.t.Helper()
	ctx := context.Background()
	s := b.schema.Store
	for ch, seq := range want.heads {
		h, err := heads.NewStore(s, nil).ReadPG(ctx, []string{ch})
		require.NoError(b.t, err)
		require.Len(b.t, h, 1, ch)
		require.Equal(b.t, seq, h[0].Seq, ch)
		require.Equal(b.t, fmt.Sprint("m", seq), h[0].MessageID)
	}
	for key, m := range want.members {
		got, err := members.NewStore(s, nil).ReadPG(ctx, key.User, []string{key.Channel})
		require.NoError(b.t, err)
		require.Equal(b.t, []channel.Membership{m}, got, "a late join never undoes the newer leave")
	}
	for key, seqs := range want.mentions {
		got, err := mentions.NewStore(s, nil).WithMentionCap(capN).ReadPG(ctx, key.User, []string{key.Channel})
		require.NoError(b.t, err)
		require.Equal(b.t, []channel.Mentions{{Key: key, Seqs: seqs}}, got)
	}
	var rows int
	require.NoError(b.t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM mentions`).Scan(&rows))
	require.Equal(b.t, len(want.mentions)*(capN+1), rows, "the retention keeps each key's newest cap+1")
	got := b.rows()
	require.Len(b.t, got, len(want.effective))
	for key, p := range want.effective {
		require.Equal(b.t, p, got[key].EffectiveRead(), "%v", key)
		require.Equal(b.t, receipt.Position{Seq: 3}, got[key].Read.Position, "a join moves the private read only")
	}
}

// A window with every kind writes every table, and the offsets are
// committed only after all of them are: while one table cannot be
// written, nothing is committed even though the others are in Postgres.
// A replay of the whole backlog changes nothing.
func TestEveryKindIsWrittenBeforeTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const capN = 3
	want := backlog(t, capN)
	b.exec(`ALTER TABLE mentions RENAME TO mentions_away`)
	recs := b.produce(b.cl, want.recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.MentionCap = capN
	cfg.Linger = 200 * time.Millisecond
	b.start(cfg)
	require.Eventually(t, func() bool { return len(b.rows()) == len(want.effective) }, waitFor, 20*time.Millisecond, "the cursor table is written meanwhile")
	// The window's mention statement has failed and been retried a few
	// times, long enough for a wrong commit of its offsets to show.
	require.Eventually(t, func() bool {
		return metric(t, reg, "receipts_persister_retries_total", "op", "upsert") >= 3
	}, waitFor, 20*time.Millisecond, "the mention table's write is retried")
	for p, off := range b.committed() {
		for _, r := range recs {
			if r.Partition == p {
				require.LessOrEqual(t, off, r.Offset, "partition %d committed past a record whose window is not written", p)
			}
		}
	}
	b.exec(`ALTER TABLE mentions_away RENAME TO mentions`)
	b.requireCommittedToEnd()
	b.requireKinds(want, capN)
	require.Zero(t, b.dltEnd())

	// A replay (duplicates of everything) is harmless.
	again := backlog(t, capN)
	b.produce(b.cl, again.recs...)
	b.requireCommittedToEnd()
	b.requireKinds(want, capN)

	// Newer mentions in a later window: Postgres deletes what is no longer
	// among the key's newest cap+1.
	key := receipt.Key{User: "u1", Channel: "ch2"}
	b.produce(b.cl, encodeAny(t, event.Decoded{Key: key, Mentions: []int64{100, 101}}))
	b.requireCommittedToEnd()
	want.mentions[key] = channel.MergeMentions(want.mentions[key], []int64{100, 101}, capN)
	b.requireKinds(want, capN)
	require.Equal(t, 2.0, metric(t, reg, "receipts_persister_mentions_trimmed_total"))
}

// A row a channel table rejects is bisected out and its records go to the
// dead-letter topic; the rest of every table is written.
func TestRejectedChannelRowIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE channel_heads ADD CONSTRAINT test_reject CHECK (channel_id <> 'reject-me')`)
	b.exec(`ALTER TABLE channel_members ADD CONSTRAINT test_reject_m CHECK (user_id <> 'bad')`)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, encodeAny(t, event.Decoded{Channel: &channel.Head{Channel: fmt.Sprintf("ok%02d", i), Seq: 5}}))
	}
	badHead := encodeAny(t, event.Decoded{Channel: &channel.Head{Channel: "reject-me", Seq: 5}})
	key := receipt.Key{User: "bad", Channel: "ok03"}
	m := channel.Join(key, 1, 1, 1)
	st := state("bad", "ok03", 4, 4)
	badMember := encodeAny(t, event.Decoded{Key: key, Membership: &m})
	goodCursor := encode(t, st) // same key, another table: written
	recs = append(recs[:10], append([]*kgo.Record{badHead, badMember, goodCursor}, recs[10:]...)...)
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.Linger = 200 * time.Millisecond
	b.start(cfg)
	b.requireCommittedToEnd()
	dead := b.readDLT(2)
	keys := map[string]string{}
	for _, d := range dead {
		keys[string(d.Key)] = event.ParseDeadLetter(d).Reason
	}
	require.Contains(t, keys["reject-me"], "channel_heads")
	require.Contains(t, keys["bad:ok03"], "channel_members")
	require.Contains(t, keys["bad:ok03"], "23514")
	heads, err := heads.NewStore(b.schema.Store, nil).PagePG(context.Background(), "", 100)
	require.NoError(t, err)
	require.Len(t, heads, 20)
	require.Len(t, b.rows(), 1, "the cursor row of the rejected member's key is written")
	for _, h := range heads {
		require.True(t, strings.HasPrefix(h.Channel, "ok"))
	}
}
