package gate

import (
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// mark is one validated receipt, before it becomes a state.
type mark struct {
	key       receipt.Key
	kind      receiptsv1.Kind
	seq       int64
	messageID string
	deviceID  string
}

// state builds what the mark writes: reading implies delivery, so READ sets
// both cursors; DELIVERED sets only the delivered one. Marks travel at epoch
// 0 (the API has no mark-unread yet).
func (m mark) state(nowMs int64) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: m.seq}, MessageID: m.messageID}
	s := receipt.State{Key: m.key, Delivered: c, DeviceID: m.deviceID, UpdatedAtUnixMs: nowMs}
	if m.kind == receiptsv1.Kind_READ {
		s.Read = c
	}
	return s
}

// invalid turns a validation failure into the API error: InvalidArgument
// with the field-named message (HTTP 400 through vanguard).
func invalid(err error) error { return connect.NewError(connect.CodeInvalidArgument, err) }

// validateMark checks one mark's fields; prefix is "" for the single-mark
// calls (fields "user_id", "seq") and "receipts[3]." in a batch.
func validateMark(prefix, user, channel string, kind receiptsv1.Kind, seq int64, messageID, deviceID string) (mark, error) {
	// The first failure, alone, keeps the message short and exact.
	for _, err := range []error{
		receipt.ValidateID(prefix+"user_id", user),
		receipt.ValidateID(prefix+"channel_id", channel),
		validateKind(prefix+"kind", kind),
		receipt.ValidateSeq(prefix+"seq", seq),
		receipt.ValidateOptionalID(prefix+"message_id", messageID),
		receipt.ValidateOptionalID(prefix+"device_id", deviceID),
	} {
		if err != nil {
			return mark{}, err
		}
	}
	return mark{key: receipt.Key{User: user, Channel: channel}, kind: kind, seq: seq, messageID: messageID, deviceID: deviceID}, nil
}

func validateKind(field string, k receiptsv1.Kind) error {
	switch k {
	case receiptsv1.Kind_READ, receiptsv1.Kind_DELIVERED:
		return nil
	case receiptsv1.Kind_KIND_UNSPECIFIED:
		// The JSON codec decodes an unknown name as unset, hence "unknown".
		return &receipt.FieldError{Field: field, Reason: "is missing or unknown; use READ or DELIVERED"}
	}
	return &receipt.FieldError{Field: field, Reason: fmt.Sprintf("must be READ or DELIVERED, got %d", int32(k))}
}

// validateBatch checks a whole MarkReceipts request; any failure rejects it
// all, before anything is written.
func validateBatch(req *receiptsv1.MarkReceiptsRequest, maxItems int) ([]mark, error) {
	rs := req.GetReceipts()
	switch {
	case len(rs) == 0:
		return nil, invalid(&receipt.FieldError{Field: "receipts", Reason: "must not be empty"})
	case len(rs) > maxItems:
		return nil, invalid(&receipt.FieldError{Field: "receipts", Reason: fmt.Sprintf("has %d items; the limit is %d", len(rs), maxItems)})
	}
	marks := make([]mark, len(rs))
	for i, r := range rs {
		m, err := validateMark("receipts["+strconv.Itoa(i)+"].", r.GetUserId(), r.GetChannelId(), r.GetKind(), r.GetSeq(), r.GetMessageId(), r.GetDeviceId())
		if err != nil {
			return nil, invalid(err)
		}
		marks[i] = m
	}
	return marks, nil
}

// validateRead checks a GetReadState request.
func validateRead(req *receiptsv1.GetReadStateRequest, maxChannels int) error {
	if err := receipt.ValidateID("user_id", req.GetUserId()); err != nil {
		return invalid(err)
	}
	chs := req.GetChannelId()
	if len(chs) > maxChannels {
		return invalid(&receipt.FieldError{Field: "channel_id", Reason: fmt.Sprintf("has %d ids; the limit is %d", len(chs), maxChannels)})
	}
	for i, c := range chs {
		if err := receipt.ValidateID("channel_id["+strconv.Itoa(i)+"]", c); err != nil {
			return invalid(err)
		}
	}
	return nil
}
