package seam

import (
	"fmt"
	"strconv"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// Notice is one validated message notice.
type Notice struct {
	Channel   string
	Seq       int64
	MessageID string
	Sender    string
	// Mentions are distinct, in request order.
	Mentions []string
	// MentionAll: the message mentions the whole channel (a group mention).
	MentionAll bool
}

// ValidateNotice checks a message notice (its fields named with prefix)
// and keeps its distinct mentions.
func ValidateNotice(prefix string, n *receiptsv1.MessageNotice) (Notice, error) {
	for _, err := range []error{
		Invalid(apierr.InvalidID, receipt.ValidateID(prefix+"channel_id", n.GetChannelId())),
		Invalid(apierr.InvalidSeq, receipt.ValidateSeq(prefix+"seq", n.GetSeq())),
		Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"message_id", n.GetMessageId())),
		Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"sender_id", n.GetSenderId())),
	} {
		if err != nil {
			return Notice{}, err
		}
	}
	ms := n.GetMentions()
	if len(ms) > MaxMentions {
		return Notice{}, TooMany(prefix+"mentions", fmt.Sprintf("has %d users", len(ms)), MaxMentions)
	}
	seen := make(map[string]bool, len(ms))
	out := Notice{Channel: n.GetChannelId(), Seq: n.GetSeq(), MessageID: n.GetMessageId(), Sender: n.GetSenderId(), MentionAll: n.GetMentionAll()}
	for i, u := range ms {
		if err := receipt.ValidateID(prefix+"mentions["+strconv.Itoa(i)+"]", u); err != nil {
			return Notice{}, Invalid(apierr.InvalidID, err)
		}
		if !seen[u] {
			seen[u] = true
			out.Mentions = append(out.Mentions, u)
		}
	}
	return out, nil
}

// MaxMentions bounds the mentioned users of one notice.
const MaxMentions = 1000
