package deletions

import (
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// CheckLead refuses a deleted seq more than channel.DeletionLead beyond
// the head of its channel (or thread): every store keeps a set within
// channel.DeletionWindow of its greatest seq, so one seq from another id
// space would push every real deletion of the set out of the window.
// field names the seq in the request's terms.
func CheckLead(field string, seq, head int64) *receipt.FieldError {
	if seq-head <= channel.DeletionLead {
		return nil
	}
	return &receipt.FieldError{Field: field, Reason: fmt.Sprintf(
		"deleted seq %d is more than %d beyond the head %d; a delete may run at most that far ahead of its notice",
		seq, channel.DeletionLead, head)}
}
