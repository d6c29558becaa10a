package event

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
)

// HeaderType names the protobuf message a record's value holds, by its
// full name (TypeReceiptEvent, …): a consumer outside this repository
// picks its decoder from it instead of from the shape of the key. Every
// record the services produce carries it. A record without it (one of an
// earlier build, or a foreign producer's) is read by its key as before;
// one whose header names another message than its key's is refused.
const HeaderType = "receipts-type"

// The message types of the records, as HeaderType names them.
var (
	// TypeRecord is the envelope every record of read-receipts this build
	// writes is (any key).
	TypeRecord = messageName(&recordv1.Record{})
	// The messages of the builds before the envelope:
	//
	// TypeReceiptEvent is a user's state in a channel (key "user:channel").
	TypeReceiptEvent = messageName(&recordv1.ReceiptEvent{})
	// TypeChannelEvent is a channel's state (key "channel").
	TypeChannelEvent = messageName(&recordv1.ChannelEvent{})
	// TypeUserEvent is a user-wide event (key "u::user").
	TypeUserEvent = messageName(&recordv1.UserEvent{})
	// TypeReadStateChange is an entry of the change feed.
	TypeReadStateChange = messageName(&recordv1.ReadStateChange{})
)

func messageName(m proto.Message) string { return string(m.ProtoReflect().Descriptor().FullName()) }

// The headers of each type, shared by every record of it: their length is
// their capacity, so a header appended to one record (its trace context)
// never writes into another's.
var (
	recordHeaders  = typeHeaders(TypeRecord)
	receiptHeaders = typeHeaders(TypeReceiptEvent)
	channelHeaders = typeHeaders(TypeChannelEvent)
	userHeaders    = typeHeaders(TypeUserEvent)
	changeHeaders  = typeHeaders(TypeReadStateChange)
)

func typeHeaders(name string) []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: HeaderType, Value: []byte(name)}}[:1:1]
}

// ChangeHeaders are the headers of a change-feed record (shared: append,
// never write into them).
func ChangeHeaders() []kgo.RecordHeader { return changeHeaders }

// headersFor are the type headers of a record of read-receipts with key
// and value: a Record's when the value is one (by its schema version),
// else the earlier message the key's shape implies.
func headersFor(key, value []byte) []kgo.RecordHeader {
	if peekVersion(value) >= EnvelopeSchemaVersion {
		return recordHeaders
	}
	return headersForKey(key)
}

// isEnvelope reports whether r is a Record: its type header says so, or,
// without one, its schema version does.
func isEnvelope(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == HeaderType {
			return string(h.Value) == TypeRecord
		}
	}
	return peekVersion(r.Value) >= EnvelopeSchemaVersion
}

// headersForKey are the type headers of a record of an earlier build with
// key: its message follows from the key's shape.
func headersForKey(key []byte) []kgo.RecordHeader {
	switch {
	case bytes.HasPrefix(key, []byte(userKeyPrefix)):
		return userHeaders
	case !bytes.ContainsRune(key, ':'):
		return channelHeaders
	default:
		return receiptHeaders
	}
}

// typed gives r the type header its key implies and returns it.
func typed(r *kgo.Record) *kgo.Record {
	r.Headers = headersForKey(r.Key)
	return r
}

// checkType refuses a record of an earlier build whose type header names
// another message than its key implies; a record without one passes.
func checkType(r *kgo.Record) error {
	for _, h := range r.Headers {
		if h.Key != HeaderType {
			continue
		}
		if want := headersForKey(r.Key)[0].Value; !bytes.Equal(h.Value, want) {
			return fmt.Errorf("%w: header %s names %.64q, the key's message is %s", ErrUndecodable, HeaderType, h.Value, want)
		}
		return nil
	}
	return nil
}

// typeHeaderOf is r's type header when it names one of the known types
// (what a dead letter keeps of its source), or false.
func typeHeaderOf(r *kgo.Record) (kgo.RecordHeader, bool) {
	for _, h := range r.Headers {
		if h.Key != HeaderType {
			continue
		}
		for _, known := range [][]kgo.RecordHeader{recordHeaders, receiptHeaders, channelHeaders, userHeaders, changeHeaders} {
			if bytes.Equal(h.Value, known[0].Value) {
				return known[0], true
			}
		}
	}
	return kgo.RecordHeader{}, false
}
