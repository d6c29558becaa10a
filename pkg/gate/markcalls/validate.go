package markcalls

import (
	"fmt"
	"strconv"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/receipt"
)

// Mark is one validated receipt, before it becomes a state.
type Mark struct {
	Key       receipt.Key
	Kind      receiptsv1.Kind
	Seq       int64
	MessageID string
	DeviceID  string
	// Epoch is the read epoch the client last saw; receipt.EpochCurrent
	// when the mark carries none (it applies at the current epoch).
	Epoch int64
	// Private moves the private read cursor instead of the public one.
	Private bool
	// Field prefixes the fields this mark's check failures name.
	Field string
}

// state builds what the mark writes: a public READ sets the read cursor
// and raises delivered (reading implies delivery); a private READ sets the
// private read cursor only (delivered is shown to others); DELIVERED sets
// the delivered cursor, whose epoch is always 0. The read epoch is the
// client's, or receipt.EpochCurrent for Redis to resolve.
func (m Mark) state(nowMs int64) receipt.State {
	s := receipt.State{Key: m.Key, DeviceID: m.DeviceID, UpdatedAtUnixMs: nowMs}
	read := receipt.Cursor{Position: receipt.Position{Epoch: m.Epoch, Seq: m.Seq}, MessageID: m.MessageID}
	delivered := receipt.Cursor{Position: receipt.Position{Seq: m.Seq}, MessageID: m.MessageID}
	switch {
	case m.Kind == receiptsv1.Kind_DELIVERED:
		s.Delivered = delivered
	case m.Private:
		read.MessageID = "" // the stores keep the private position only
		s.PrivateRead = read
	default:
		s.Read, s.Delivered = read, delivered
	}
	return s
}

// EpochAhead is the answer to a mark whose explicit epoch is ahead of the
// stored read epoch (receipt.EpochAhead): InvalidArgument, nothing written.
func EpochAhead(m Mark, stored int64) error {
	return seam.Invalid(apierr.EpochAhead, &receipt.FieldError{Field: m.Field + "epoch", Reason: fmt.Sprintf(
		"%d is ahead of the stored read epoch %d; send an epoch you read (only Mark-unread moves it forward)", m.Epoch, stored)})
}

// MarkInput is one mark as a call carries it, before validation.
type MarkInput struct {
	// Prefix starts the fields a failure names: "" for the single-mark
	// calls (fields "user_id", "seq") and "receipts[3]." in a batch.
	Prefix    string
	User      string
	Channel   string
	Kind      receiptsv1.Kind
	Seq       int64
	MessageID string
	DeviceID  string
	// Epoch is nil when the mark carries none.
	Epoch   *int64
	Private bool
}

// ValidateMark checks one mark's fields; a failure is the API's error.
func ValidateMark(in MarkInput) (Mark, error) {
	prefix := in.Prefix
	// The first failure, alone, keeps the message short and exact.
	for _, err := range []error{
		seam.Invalid(apierr.InvalidID, receipt.ValidateID(prefix+"user_id", in.User)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateID(prefix+"channel_id", in.Channel)),
		seam.Invalid(apierr.InvalidKind, validateKind(prefix+"kind", in.Kind)),
		seam.Invalid(apierr.InvalidSeq, receipt.ValidateSeq(prefix+"seq", in.Seq)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"message_id", in.MessageID)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"device_id", in.DeviceID)),
	} {
		if err != nil {
			return Mark{}, err
		}
	}
	m := Mark{Key: receipt.Key{User: in.User, Channel: in.Channel}, Kind: in.Kind, Seq: in.Seq, MessageID: in.MessageID, DeviceID: in.DeviceID,
		Epoch: receipt.EpochCurrent, Private: in.Private, Field: prefix}
	if in.Epoch != nil {
		if *in.Epoch < 0 {
			return Mark{}, seam.Invalid(apierr.InvalidEpoch, &receipt.FieldError{Field: prefix + "epoch", Reason: fmt.Sprintf("must be >= 0, got %d", *in.Epoch)})
		}
		if err := receipt.ValidateEpoch(prefix+"epoch", *in.Epoch); err != nil {
			return Mark{}, seam.Invalid(apierr.InvalidEpoch, err)
		}
		m.Epoch = *in.Epoch
	}
	if in.Private && in.Kind != receiptsv1.Kind_READ {
		return Mark{}, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: prefix + "private", Reason: "applies to READ marks only"})
	}
	return m, nil
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

// BatchTooLarge is the refusal of a MarkReceipts call of n receipts, over
// maxItems (InvalidArgument); a decoder that counts while it reads (the
// fast REST path) answers with it before building the whole batch.
func BatchTooLarge(n, maxItems int) error {
	return seam.TooMany("receipts", fmt.Sprintf("has %d items", n), maxItems)
}

// validateBatch checks a whole MarkReceipts request; any failure rejects it
// all, before anything is written.
func validateBatch(req *receiptsv1.MarkReceiptsRequest, maxItems int) ([]Mark, error) {
	rs := req.GetReceipts()
	switch {
	case len(rs) == 0:
		return nil, seam.Invalid(apierr.EmptyRequest, &receipt.FieldError{Field: "receipts", Reason: "must not be empty"})
	case len(rs) > maxItems:
		return nil, BatchTooLarge(len(rs), maxItems)
	}
	marks := make([]Mark, len(rs))
	for i, r := range rs {
		m, err := ValidateMark(MarkInput{
			Prefix: "receipts[" + strconv.Itoa(i) + "].", User: r.GetUserId(), Channel: r.GetChannelId(), Kind: r.GetKind(),
			Seq: r.GetSeq(), MessageID: r.GetMessageId(), DeviceID: r.GetDeviceId(), Epoch: r.Epoch, Private: r.GetPrivate(),
		})
		if err != nil {
			return nil, err
		}
		marks[i] = m
	}
	return marks, nil
}

// validateRead checks a GetReadState request.
func validateRead(req *receiptsv1.GetReadStateRequest, maxChannels int) error {
	if err := receipt.ValidateID("user_id", req.GetUserId()); err != nil {
		return seam.Invalid(apierr.InvalidID, err)
	}
	chs := req.GetChannelId()
	if len(chs) > maxChannels {
		return seam.TooMany("channel_id", fmt.Sprintf("has %d ids", len(chs)), maxChannels)
	}
	for i, c := range chs {
		if err := receipt.ValidateID("channel_id["+strconv.Itoa(i)+"]", c); err != nil {
			return seam.Invalid(apierr.InvalidID, err)
		}
	}
	return nil
}
