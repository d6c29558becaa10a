package event

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter headers, set on every record sent to the dead-letter topic,
// and the header of a parked record an operator re-produced to the topic.
const (
	HeaderReason          = "dlt-reason"
	HeaderSourceTopic     = "dlt-source-topic"
	HeaderSourcePartition = "dlt-source-partition"
	HeaderSourceOffset    = "dlt-source-offset"
	HeaderAttempt         = "dlt-attempt"
	HeaderReplayedFrom    = "dlt-replayed-from"
	// HeaderOriginalKeyBytes and HeaderOriginalValueBytes are set when
	// DeadLetter truncated the source's key or value: the sizes it had.
	HeaderOriginalKeyBytes   = "dlt-original-key-bytes"
	HeaderOriginalValueBytes = "dlt-original-value-bytes"
)

// Trace headers: the W3C trace context of the call that produced a record
// (set only when that call was traced; pkg/tracing writes and reads them).
// A dead letter keeps its source's, so that its repair continues the trace.
// No consumer requires them, and none refuses a record that has them.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// maxTraceHeaderBytes bounds a trace header a dead letter copies (W3C
// bounds tracestate at 512 bytes; a foreign record's larger one is dropped).
const maxTraceHeaderBytes = 512

// maxReasonBytes bounds the reason header.
const maxReasonBytes = 1024

// Bounds of a dead letter's copy of its source: a record over them is
// foreign (no event is that large: MaxValueBytes, and a key is two ids),
// so its copy is truncated — it could not be replayed anyway — and the
// dead letter stays a few KiB whatever the source, far below any topic's
// max.message.bytes.
const (
	MaxDeadLetterKeyBytes   = 1024
	MaxDeadLetterValueBytes = MaxValueBytes
)

// Envelope is what a dead letter's headers say about it. Every consumer of
// dead letters reads them through ParseDeadLetter, never header by header.
type Envelope struct {
	// Reason is why the record was dead-lettered ("" when absent).
	Reason string
	// SourceTopic, SourcePartition and SourceOffset locate the original
	// record; the numbers are -1 when absent or malformed.
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	// Attempt counts how often the record was dead-lettered: 1 the first
	// time, one more each time an operator replayed it and it came back;
	// 0 when absent.
	Attempt int
	// ReplayedFrom is the parked record an operator re-produced this one
	// from, or -1.
	ReplayedFrom int64
	// OriginalKeyBytes and OriginalValueBytes are the sizes of the source's
	// key and value when DeadLetter truncated them, else -1.
	OriginalKeyBytes   int64
	OriginalValueBytes int64
}

// Truncated reports whether the dead letter carries a truncated copy of
// its source (which cannot be replayed).
func (e Envelope) Truncated() bool { return e.OriginalKeyBytes >= 0 || e.OriginalValueBytes >= 0 }

// DeadLetter builds the dead-letter copy of a source record: its key and
// value, plus headers naming the reason, the source and the attempt (one
// more than the source's own, when an operator replayed it). The envelope
// is bounded: a key over MaxDeadLetterKeyBytes or a value over
// MaxDeadLetterValueBytes is truncated, with a header giving the size it
// had (the source offset locates the original while the topic retains
// it), so one foreign record, however close to max.message.bytes, cannot
// make its dead letter too large for the dead-letter topic.
func DeadLetter(src *kgo.Record, dltTopic, reason string) *kgo.Record {
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes]
	}
	attempt := max(ParseDeadLetter(src).Attempt, 0) + 1
	dl := &kgo.Record{
		Topic: dltTopic,
		Key:   src.Key,
		Value: src.Value,
		Headers: []kgo.RecordHeader{
			{Key: HeaderReason, Value: []byte(reason)},
			{Key: HeaderSourceTopic, Value: []byte(src.Topic)},
			{Key: HeaderSourcePartition, Value: []byte(strconv.FormatInt(int64(src.Partition), 10))},
			{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
			{Key: HeaderAttempt, Value: []byte(strconv.Itoa(attempt))},
		},
	}
	if h, ok := typeHeaderOf(src); ok {
		dl.Headers = append(dl.Headers, h)
	}
	for _, h := range src.Headers {
		if (h.Key == HeaderTraceParent || h.Key == HeaderTraceState) && len(h.Value) <= maxTraceHeaderBytes {
			dl.Headers = append(dl.Headers, h)
		}
	}
	if len(src.Key) > MaxDeadLetterKeyBytes {
		dl.Key = src.Key[:MaxDeadLetterKeyBytes:MaxDeadLetterKeyBytes]
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderOriginalKeyBytes, Value: []byte(strconv.Itoa(len(src.Key)))})
	}
	if len(src.Value) > MaxDeadLetterValueBytes {
		dl.Value = src.Value[:MaxDeadLetterValueBytes:MaxDeadLetterValueBytes]
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderOriginalValueBytes, Value: []byte(strconv.Itoa(len(src.Value)))})
	}
	return dl
}

// Replayed builds the record an operator re-produces to topic from a parked
// dead letter: its key and value, and the parked id.
func Replayed(topic string, parkedID int64, key, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: key, Value: value,
		Headers: append(headersFor(key, value), kgo.RecordHeader{Key: HeaderReplayedFrom, Value: []byte(strconv.FormatInt(parkedID, 10))})}
}

// ParseDeadLetter reads a record's dead-letter headers.
func ParseDeadLetter(r *kgo.Record) Envelope {
	return Envelope{
		Reason:          header(r, HeaderReason),
		SourceTopic:     header(r, HeaderSourceTopic),
		SourcePartition: int32(headerInt(r, HeaderSourcePartition, 32, -1)),
		SourceOffset:    headerInt(r, HeaderSourceOffset, 64, -1),
		Attempt:         int(headerInt(r, HeaderAttempt, 32, 0)),
		ReplayedFrom:    headerInt(r, HeaderReplayedFrom, 64, -1),

		OriginalKeyBytes:   headerInt(r, HeaderOriginalKeyBytes, 64, -1),
		OriginalValueBytes: headerInt(r, HeaderOriginalValueBytes, 64, -1),
	}
}

// HeaderValue is the value of the record's first header named name, or "".
func HeaderValue(r *kgo.Record, name string) string { return header(r, name) }

// header returns the value of the named header, or "".
func header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// headerInt parses a non-negative number header, or returns missing.
func headerInt(r *kgo.Record, name string, bits int, missing int64) int64 {
	n, err := strconv.ParseInt(header(r, name), 10, bits)
	if err != nil || n < 0 {
		return missing
	}
	return n
}
