package seam

import (
	"context"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// Parts are what kinds add to answers of calls that are not theirs (the
// fully-read marker in GetReadState and ListThreads): each reads the
// user's values for the answer and sets them on it. A kind's calls
// register their parts when the gate is built (pkg/gate's partsOf); the
// calls that build the answers run them after. A part's failure fails the
// call: an answer without it would look whole.
type Parts struct {
	// ReadState adds to a GetReadState answer; listed are the channels
	// the call listed (none: the answer's page).
	ReadState []func(ctx context.Context, user string, listed []string, resp *receiptsv1.GetReadStateResponse) error
	// Threads adds to a ListThreads answer.
	Threads []func(ctx context.Context, user string, resp *receiptsv1.ListThreadsResponse) error
}
