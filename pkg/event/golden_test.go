package event_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tombstone"
)

var updateGolden = flag.Bool("update-golden", false, "add this build's records to testdata/golden-records.json")

// goldenRecord is a record as a build wrote it, with what it decoded to
// then.
type goldenRecord struct {
	Name    string            `json:"name"`
	Key     []byte            `json:"key"`
	Value   []byte            `json:"value"`
	Headers map[string]string `json:"headers,omitempty"`
	Decoded json.RawMessage   `json:"decoded"`
}

const goldenPath = "testdata/golden-records.json"

// Records written by earlier builds (testdata/golden-records.json, one
// set per build that changed the format) still decode to what they meant:
// a change of the record format must keep reading the topic's two days.
// `go test ./pkg/event/ -run TestGoldenRecords -update-golden` adds this
// build's records under a new name prefix; never rewrite old entries.
func TestGoldenRecordsStillDecode(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(goldenPath)
	if *updateGolden && os.IsNotExist(err) {
		b, err = []byte("[]"), nil
	}
	require.NoError(t, err)
	var golden []goldenRecord
	require.NoError(t, json.Unmarshal(b, &golden))
	if *updateGolden {
		golden = append(golden, currentRecords(t)...)
		out, err := json.MarshalIndent(golden, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
		require.NoError(t, os.WriteFile(goldenPath, append(out, '\n'), 0o644))
	}
	require.NotEmpty(t, golden)
	for _, g := range golden {
		r := &kgo.Record{Key: g.Key, Value: g.Value}
		for k, v := range g.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		d, err := event.DecodeRecord(r)
		require.NoError(t, err, g.Name)
		got, err := json.Marshal(d)
		require.NoError(t, err)
		require.JSONEq(t, string(g.Decoded), string(got), g.Name)
	}
}

// currentRecords are this build's records of every kind ("envelope/…":
// the first build writing the Record envelope), and the same without the
// header ("envelope untyped/…": a consumer that drops headers still tells
// an envelope by its schema version). The builds before wrote "typed/…"
// and "untyped/…" (their messages, with and without the header).
func currentRecords(t *testing.T) []goldenRecord {
	t.Helper()
	k := receipt.Key{User: "u:1", Channel: "c%1"}
	c := receipt.Cursor{Position: receipt.Position{Epoch: 2, Seq: 42}, MessageID: "m42"}
	st := receipt.State{Key: k, Read: c, Delivered: c, PrivateRead: receipt.Cursor{Position: receipt.Position{Epoch: 3, Seq: 40}}, DeviceID: "ios", UpdatedAtUnixMs: 1_700_000_000_000}
	must := func(r *kgo.Record, err error) *kgo.Record {
		t.Helper()
		require.NoError(t, err)
		return r
	}
	stamped := func(r *kgo.Record, gen int64) *kgo.Record { event.StampGeneration(r, gen); return r }
	head := channel.Head{Channel: "c%1", Seq: 99, MessageID: "m99", UpdatedAtUnixMs: 1_700_000_000_001}
	recs := []struct {
		name string
		rec  *kgo.Record
	}{
		{"receipt", stamped(must(event.Encode(st)), 4)},
		{"receipt batch", event.EncodeReceipts([]receipt.State{st}, []int64{5}, "t")[0]},
		{"head", must(event.EncodeHead(head))},
		{"group mentions", must(event.EncodeHeadWithGroupMentions(head, []channel.GroupMention{{Seq: 98, Sender: "u2"}}))},
		{"membership with join read", stamped(must(event.EncodeMembership(channel.Membership{Key: k, Member: true, JoinSeq: 7, VersionSeq: 1, VersionUnixMs: 1_700_000_000_002}, &st)), 0)},
		{"mentions", must(event.EncodeMentions(k, []int64{41, 42}))},
		{"notifications", must(event.EncodeNotifications(notification.Register{Key: k, Level: notification.Mentions, MutedUntilUnixMs: 1_800_000_000_000, VersionUnixMs: 1_700_000_000_003}, 2, true))},
		{"settings", stamped(must(event.EncodeSettings(privacy.Settings{User: "u:1", ShareRead: true, DefaultLevel: notification.None, VersionMs: 1_700_000_000_004})), 1)},
		{"erasure", must(event.EncodeErasure(tombstone.Tombstone{User: "u:1", Generation: 6, ErasedAtUnixMs: 1_700_000_000_005}))},
		{"thread", must(event.EncodeThread(thread.State{Key: thread.Key{User: "u:1", Ref: thread.Ref{Channel: "c%1", Root: 30}}, Cursors: st, Follow: thread.Follow{Following: true, VersionUnixMs: 1_700_000_000_006}, Mentions: []int64{31}}, 3, true))},
		{"thread head", must(event.EncodeThreadHead(thread.Head{Ref: thread.Ref{Channel: "c%1", Root: 30}, Seq: 35, MessageID: "r35", UpdatedAtUnixMs: 1_700_000_000_007}))},
		{"deletions", must(event.EncodeDecoded(event.Decoded{Deletions: &channel.Deletions{Channel: "c%1", Seqs: []int64{10, 12}, UpdatedAtUnixMs: 1_700_000_000_008}}))},
		{"thread deletions", must(event.EncodeDecoded(event.Decoded{Deletions: &channel.Deletions{Channel: "c%1", Root: 30, Seqs: []int64{33}, UpdatedAtUnixMs: 1_700_000_000_009}}))},
	}
	out := make([]goldenRecord, len(recs))
	for i, r := range recs {
		d, err := event.DecodeRecord(r.rec)
		require.NoError(t, err, r.name)
		j, err := json.Marshal(d)
		require.NoError(t, err)
		g := goldenRecord{Name: "envelope/" + r.name, Key: r.rec.Key, Value: r.rec.Value, Decoded: j}
		for _, h := range r.rec.Headers {
			if g.Headers == nil {
				g.Headers = map[string]string{}
			}
			g.Headers[h.Key] = string(h.Value)
		}
		out[i] = g
	}
	// The same values without the header.
	for _, g := range out[:len(recs)] {
		g.Name, g.Headers = "envelope untyped/"+g.Name[len("envelope/"):], nil
		out = append(out, g)
	}
	return out
}
