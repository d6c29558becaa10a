package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Every encoder's record names its message in the type header, and that
// message alone reads the whole value: a consumer needs the header and the
// proto file, not the key's rule.
func TestEveryRecordNamesItsMessage(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u1", Channel: "c1"}
	must := func(r *kgo.Record, err error) *kgo.Record {
		t.Helper()
		require.NoError(t, err)
		return r
	}
	recs := map[string]*kgo.Record{
		"receipt":       must(event.Encode(sample())),
		"batch":         event.EncodeReceipts([]receipt.State{sample()}, []int64{3}, "t")[0],
		"head":          must(event.EncodeHead(channel.Head{Channel: "c1", Seq: 9, UpdatedAtUnixMs: 1})),
		"group mention": must(event.EncodeHeadWithGroupMentions(channel.Head{Channel: "c1", Seq: 9, UpdatedAtUnixMs: 1}, []channel.GroupMention{{Seq: 9, Sender: "u2"}})),
		"membership":    must(event.EncodeMembership(channel.Membership{Key: k, Member: true, JoinSeq: 1, VersionUnixMs: 1}, nil)),
		"mentions":      must(event.EncodeMentions(k, []int64{4})),
		"notifications": must(event.EncodeNotifications(notification.Register{Key: k, Level: notification.Mentions, VersionUnixMs: 1}, 2, true)),
		"settings":      must(event.EncodeSettings(privacy.Settings{User: "u1", ShareRead: true, VersionMs: 1})),
		"erasure":       must(event.EncodeErasure(tombstone.Tombstone{User: "u1", Generation: 2, ErasedAtUnixMs: 1})),
		"thread":        must(event.EncodeThread(thread.State{Key: thread.Key{User: "u1", Ref: thread.Ref{Channel: "c1", Root: 3}}, Follow: thread.Follow{Following: true, VersionUnixMs: 1}}, 0, false)),
		"thread head":   must(event.EncodeThreadHead(thread.Head{Ref: thread.Ref{Channel: "c1", Root: 3}, Seq: 5, UpdatedAtUnixMs: 1})),
		"deletions":     must(event.EncodeDecoded(event.Decoded{Deletions: &channel.Deletions{Channel: "c1", Seqs: []int64{2}, UpdatedAtUnixMs: 1}})),
	}
	for name, rec := range recs {
		typ := event.HeaderValue(rec, event.HeaderType)
		require.NotEmpty(t, typ, name)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typ))
		require.NoError(t, err, name)
		m := mt.New().Interface()
		require.NoError(t, proto.Unmarshal(rec.Value, m), name)
		require.Empty(t, m.ProtoReflect().GetUnknown(), "%s: %s leaves fields unread", name, typ)
		_, err = event.DecodeRecord(rec)
		require.NoError(t, err, name)
	}
}

// A record whose header names another message than its key's is refused;
// one without the header (an earlier build's) is read by its key.
func TestTypeHeaderMustMatchTheKey(t *testing.T) {
	t.Parallel()
	rec, err := event.Encode(sample())
	require.NoError(t, err)

	bare := &kgo.Record{Key: rec.Key, Value: rec.Value}
	got, err := event.Decode(bare)
	require.NoError(t, err)
	require.Equal(t, sample(), got)

	wrong := &kgo.Record{Key: rec.Key, Value: rec.Value, Headers: []kgo.RecordHeader{{Key: event.HeaderType, Value: []byte(event.TypeChannelEvent)}}}
	_, err = event.DecodeRecord(wrong)
	require.ErrorIs(t, err, event.ErrUndecodable)
	require.ErrorContains(t, err, event.HeaderType)
}

// A dead letter keeps its source's type header, a replayed record gets
// the one its value implies (an earlier build's: its key's), and a trace header appended to one record
// never shows on another (the type headers are shared).
func TestTypeHeaderTravels(t *testing.T) {
	t.Parallel()
	a, err := event.Encode(sample())
	require.NoError(t, err)
	b, err := event.Encode(sample())
	require.NoError(t, err)
	a.Headers = append(a.Headers, kgo.RecordHeader{Key: event.HeaderTraceParent, Value: []byte("00-x")})
	require.Empty(t, event.HeaderValue(b, event.HeaderTraceParent))

	dl := event.DeadLetter(a, "dlt", "reason")
	require.Equal(t, event.TypeRecord, event.HeaderValue(dl, event.HeaderType))
	require.Equal(t, event.TypeReceiptEvent, event.HeaderValue(event.DeadLetter(legacy(t, a), "dlt", "reason"), event.HeaderType))
	require.Equal(t, event.TypeRecord, event.HeaderValue(event.Replayed("read-receipts", 7, a.Key, a.Value), event.HeaderType))

	re := event.Replayed("read-receipts", 7, []byte("c1"), nil)
	require.Equal(t, event.TypeChannelEvent, event.HeaderValue(re, event.HeaderType))
	require.Equal(t, "7", event.HeaderValue(re, event.HeaderReplayedFrom))
}
