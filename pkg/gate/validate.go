package gate

import (
	"fmt"
	"strconv"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/receipt"
)

// mark is one validated receipt, before it becomes a state.
type mark struct {
	key       receipt.Key
	kind      receiptsv1.Kind
	seq       int64
	messageID string
	deviceID  string
	// epoch is the read epoch the client last saw; receipt.EpochCurrent
	// when the mark carries none (it applies at the current epoch).
	epoch int64
	// private moves the private read cursor instead of the public one.
	private bool
	// field prefixes the fields this mark's check failures name.
	field string
}

// state builds what the mark writes: a public READ sets the read cursor
// and raises delivered (reading implies delivery); a private READ sets the
// private read cursor only (delivered is shown to others); DELIVERED sets
// the delivered cursor, whose epoch is always 0. The read epoch is the
// client's, or receipt.EpochCurrent for Redis to resolve.
func (m mark) state(nowMs int64) receipt.State {
	s := receipt.State{Key: m.key, DeviceID: m.deviceID, UpdatedAtUnixMs: nowMs}
	read := receipt.Cursor{Position: receipt.Position{Epoch: m.epoch, Seq: m.seq}, MessageID: m.messageID}
	delivered := receipt.Cursor{Position: receipt.Position{Seq: m.seq}, MessageID: m.messageID}
	switch {
	case m.kind == receiptsv1.Kind_DELIVERED:
		s.Delivered = delivered
	case m.private:
		read.MessageID = "" // the stores keep the private position only
		s.PrivateRead = read
	default:
		s.Read, s.Delivered = read, delivered
	}
	return s
}

// epochAhead is the answer to a mark whose explicit epoch is ahead of the
// stored read epoch (receipt.EpochAhead): InvalidArgument, nothing written.
func epochAhead(m mark, stored int64) error {
	return seam.Invalid(apierr.EpochAhead, &receipt.FieldError{Field: m.field + "epoch", Reason: fmt.Sprintf(
		"%d is ahead of the stored read epoch %d; send an epoch you read (only mark-unread moves it forward)", m.epoch, stored)})
}

// markInput is one mark as a call carries it, before validation.
type markInput struct {
	// prefix starts the fields a failure names: "" for the single-mark
	// calls (fields "user_id", "seq") and "receipts[3]." in a batch.
	prefix    string
	user      string
	channel   string
	kind      receiptsv1.Kind
	seq       int64
	messageID string
	deviceID  string
	// epoch is nil when the mark carries none.
	epoch   *int64
	private bool
}

// validateMark checks one mark's fields; a failure is the API's error.
func validateMark(in markInput) (mark, error) {
	prefix := in.prefix
	// The first failure, alone, keeps the message short and exact.
	for _, err := range []error{
		seam.Invalid(apierr.InvalidID, receipt.ValidateID(prefix+"user_id", in.user)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateID(prefix+"channel_id", in.channel)),
		seam.Invalid(apierr.InvalidKind, validateKind(prefix+"kind", in.kind)),
		seam.Invalid(apierr.InvalidSeq, receipt.ValidateSeq(prefix+"seq", in.seq)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"message_id", in.messageID)),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"device_id", in.deviceID)),
	} {
		if err != nil {
			return mark{}, err
		}
	}
	m := mark{key: receipt.Key{User: in.user, Channel: in.channel}, kind: in.kind, seq: in.seq, messageID: in.messageID, deviceID: in.deviceID,
		epoch: receipt.EpochCurrent, private: in.private, field: prefix}
	if in.epoch != nil {
		if *in.epoch < 0 {
			return mark{}, seam.Invalid(apierr.InvalidEpoch, &receipt.FieldError{Field: prefix + "epoch", Reason: fmt.Sprintf("must be >= 0, got %d", *in.epoch)})
		}
		if err := receipt.ValidateEpoch(prefix+"epoch", *in.epoch); err != nil {
			return mark{}, seam.Invalid(apierr.InvalidEpoch, err)
		}
		m.epoch = *in.epoch
	}
	if in.private && in.kind != receiptsv1.Kind_READ {
		return mark{}, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: prefix + "private", Reason: "applies to READ marks only"})
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
func validateBatch(req *receiptsv1.MarkReceiptsRequest, maxItems int) ([]mark, error) {
	rs := req.GetReceipts()
	switch {
	case len(rs) == 0:
		return nil, seam.Invalid(apierr.EmptyRequest, &receipt.FieldError{Field: "receipts", Reason: "must not be empty"})
	case len(rs) > maxItems:
		return nil, BatchTooLarge(len(rs), maxItems)
	}
	marks := make([]mark, len(rs))
	for i, r := range rs {
		m, err := validateMark(markInput{
			prefix: "receipts[" + strconv.Itoa(i) + "].", user: r.GetUserId(), channel: r.GetChannelId(), kind: r.GetKind(),
			seq: r.GetSeq(), messageID: r.GetMessageId(), deviceID: r.GetDeviceId(), epoch: r.Epoch, private: r.GetPrivate(),
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
