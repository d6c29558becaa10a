package event

import (
	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// recordCursor converts a cursor to its record form.
func recordCursor(c receipt.Cursor) *recordv1.Cursor {
	return &recordv1.Cursor{
		Position:  &recordv1.Position{Epoch: c.Position.Epoch, Seq: c.Position.Seq},
		MessageId: c.MessageID,
	}
}

// cursorFromRecord converts a record's cursor as CursorFromProto does an
// API cursor: nil is the zero cursor, a message id without a position is
// dropped.
func cursorFromRecord(c *recordv1.Cursor) receipt.Cursor {
	return cursorOf(c.GetPosition().GetEpoch(), c.GetPosition().GetSeq(), c.GetMessageId())
}

// recordNotifications converts a notification register to its record form.
func recordNotifications(r notification.Register) *recordv1.NotificationRegister {
	return &recordv1.NotificationRegister{Level: r.Level.String(), MutedUntilUnixMs: r.MutedUntilUnixMs, VersionUnixMs: r.VersionUnixMs}
}
