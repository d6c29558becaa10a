package fullyread

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
)

// A marker in its user's Redis hash: field "CHANNEL ROOT" (the root in
// decimal, 0 for the channel; a channel id may hold spaces, a root never
// does, so the last space splits them), value "SEQ UPDATED_MS MSG"
// (decimal; the message id last, as it may hold spaces).

func field(r Ref) string { return r.Key.Channel + " " + strconv.FormatInt(r.Root, 10) }

// parseField inverts field for user's hash.
func parseField(user, f string) (Ref, error) {
	i := strings.LastIndexByte(f, ' ')
	if i <= 0 {
		return Ref{}, fmt.Errorf("unexpected fully-read field %q", f)
	}
	root, err := strconv.ParseInt(f[i+1:], 10, 64)
	if err != nil || root < 0 {
		return Ref{}, fmt.Errorf("unexpected fully-read field %q", f)
	}
	return Ref{Key: receipt.Key{User: user, Channel: f[:i]}, Root: root}, nil
}

func encode(m Marker) string {
	return strconv.FormatInt(m.Seq, 10) + " " + strconv.FormatInt(m.UpdatedAtUnixMs, 10) + " " + m.MessageID
}

// decode reads r's marker from its value; a value that does not decode,
// or a marker that does not validate, is an error.
func decode(r Ref, v string) (Marker, error) {
	f := strings.SplitN(v, " ", 3)
	if len(f) != 3 {
		return Marker{}, fmt.Errorf("fully-read marker %q: want 3 fields", v)
	}
	seq, err1 := strconv.ParseInt(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[1], 10, 64)
	m := Marker{Ref: r, Seq: seq, UpdatedAtUnixMs: at, MessageID: f[2]}
	if err1 != nil || err2 != nil || m.Validate() != nil {
		return Marker{}, fmt.Errorf("fully-read marker %q: invalid", v)
	}
	return m, nil
}

var errNotAMarker = errors.New("not a fully-read marker")

// payload is the kind's part of a record: the envelope carries the user,
// the channel, the root and the time; the payload (records.proto's
// FullyRead) the seq and the message id.
var payload = &kind.Payload[Marker]{
	Type: recordv1.PayloadType_PAYLOAD_TYPE_FULLY_READ,
	Encode: func(m Marker) (event.RecordEnvelope, []byte, error) {
		b, err := proto.Marshal(&recordv1.FullyRead{Seq: m.Seq, MessageId: m.MessageID})
		return event.RecordEnvelope{User: m.Key.User, Channel: m.Key.Channel, Root: m.Root, AcceptedAtUnixMs: m.UpdatedAtUnixMs}, b, err
	},
	Decode: func(e event.RecordEnvelope, b []byte) (Marker, error) {
		var p recordv1.FullyRead
		if err := proto.Unmarshal(b, &p); err != nil {
			return Marker{}, fmt.Errorf("%w: %w", errNotAMarker, err)
		}
		m := Marker{Ref: Ref{Key: receipt.Key{User: e.User, Channel: e.Channel}, Root: e.Root},
			Seq: p.GetSeq(), MessageID: p.GetMessageId(), UpdatedAtUnixMs: e.AcceptedAtUnixMs}
		if err := m.Validate(); err != nil {
			return Marker{}, fmt.Errorf("%w: %w", errNotAMarker, err)
		}
		return m, nil
	},
}
