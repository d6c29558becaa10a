package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"connectrpc.com/connect"
	"github.com/sethvargo/go-retry"

	"github.com/readstate/receipts/api/retries"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/backoff"
)

// MaxAttemptsDefault is the attempts of one call, the first included,
// unless RetryPolicy.MaxAttempts says otherwise: with the backoff's
// defaults about 1.5 s of waiting (more when the server asks for it).
const MaxAttemptsDefault = 5

// RetryPolicy says how often and how patiently a call is retried.
//
// A call is retried only on a refusal that says "later" (IsRetryable:
// Unavailable; ResourceExhausted with reason RATE_LIMITED; Aborted with
// reason HEAD_BEHIND) and only where a retry cannot change the outcome,
// as the one table of both clients says (api/retries/retries.json):
//
//   - Marks (MarkReceipts, MarkRead, MarkDelivered, ReadAll,
//     MarkThreadRead), message notices, deletions and every read are
//     retried on all of those. A mark is a max-register write: the stores
//     keep max(stored, incoming) (receipt.Merge), so a mark applied twice,
//     or applied by an attempt whose answer was lost, leaves the same
//     state. A notice raises the head (max) and adds to mention sets, a
//     deletion adds to a grow-only set, alike.
//   - MarkUnread, MarkThreadUnread, FollowThread, UnfollowThread,
//     JoinChannel, LeaveChannel, UpdateSettings, SetNotifications and
//     EraseUser are not idempotent: each attempt takes a new version (a
//     mark-unread without an epoch moves the user's own read to the epoch
//     after the stored one; with the epoch of its first answer, or the one
//     the caller read, a repeat changes nothing, so the caller may repeat
//     it; a membership, follow, settings or notification change is
//     versioned by the head and the clock at the time; an erasure raises
//     the generation). Repeating one that was applied but whose answer was
//     lost (Unavailable: Redis answered, Kafka did not) could undo a
//     change made in between, a read after the mark-unread or a leave
//     after the join. They are retried only on refusals the gateway gives
//     before it writes anything (HEAD_BEHIND, RATE_LIMITED) and when the
//     connection could not be opened; on any other failure the caller
//     decides.
//
// Each wait is the backoff's, raised to the Retry-After the server sent.
// A wait that would outlast the caller's context deadline is not begun:
// the call fails with the last refusal at once.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one call, the first included; for
	// a watch stream, the failed reconnects in a row. Defaults to
	// MaxAttemptsDefault; 1 turns retrying off.
	MaxAttempts int
	// Backoff shapes the waits: exponential from Base, capped at Cap, with
	// ± JitterPercent, and within MaxDuration when set. Zero fields take
	// pkg/backoff's defaults (100ms, 10s, 20%).
	Backoff backoff.Config
	// OnRetry, when set, is called before each wait (from the calling
	// goroutine): for logs and metrics.
	OnRetry func(Retry)
}

// Retry describes a wait before another attempt.
type Retry struct {
	// Procedure is the RPC's ("/receipts.v1.ReceiptService/MarkRead").
	Procedure string
	// Attempt is the attempt that failed, from 1.
	Attempt int
	// Err is its failure.
	Err error
	// Wait is the pause before the next attempt: the backoff's, at least
	// the server's Retry-After.
	Wait time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, MaxAttemptsDefault)
	return p
}

// Retried reports whether a failure of procedure is retried (RetryPolicy).
func Retried(procedure string, err error) bool {
	if retries.Of(procedure) == retries.Blind {
		return IsRetryable(err)
	}
	if neverSent(err) {
		return true
	}
	switch apierr.ReasonOf(err) {
	case apierr.HeadBehind, apierr.RateLimited:
		return true
	}
	return false
}

// neverSent reports whether err is a failure to open the connection: the
// request never left, so nothing can have been applied.
func neverSent(err error) bool {
	if connect.IsWireError(err) {
		return false
	}
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// retryState is one retry loop's: the attempts since the last progress
// and the last failure.
type retryState struct {
	attempt int
	last    error
}

// backoff is the waits of one loop as a go-retry Backoff, st its state:
// MaxAttempts-1 waits from the policy's backoff, each raised to the last
// failure's Retry-After, none begun when it would outlast ctx's deadline.
// fresh, when set, is asked before each wait whether progress was made
// since the last failure (a watch stream delivered events): then the
// backoff and the attempt count start over.
func (p RetryPolicy) backoff(ctx context.Context, procedure string, st *retryState, fresh func() bool) retry.Backoff {
	waits := func() retry.Backoff { return retry.WithMaxRetries(uint64(p.MaxAttempts-1), p.Backoff.New()) }
	b := waits()
	return retry.BackoffFunc(func() (time.Duration, bool) {
		if fresh != nil && fresh() {
			b = waits()
		}
		d, stop := b.Next()
		if stop {
			return 0, true
		}
		d = max(d, RetryAfter(st.last))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return 0, true
		}
		if p.OnRetry != nil {
			p.OnRetry(Retry{Procedure: procedure, Attempt: st.attempt, Err: st.last, Wait: d})
		}
		return d, false
	})
}

// retrier retries unary calls (RetryPolicy); streams pass through.
type retrier struct{ p RetryPolicy }

func (r retrier) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	if r.p.MaxAttempts <= 1 {
		return next
	}
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if ctx.Err() != nil {
			return next(ctx, req) // connect-go's own answer to a dead context
		}
		proc := req.Spec().Procedure
		var st retryState
		resp, err := retry.DoValue(ctx, r.p.backoff(ctx, proc, &st, nil), func(ctx context.Context) (connect.AnyResponse, error) {
			st.attempt++
			resp, err := next(ctx, req)
			if err != nil && Retried(proc, err) {
				st.last = err
				return nil, retry.RetryableError(err)
			}
			return resp, err
		})
		return resp, stopped(ctx, err, st.last)
	}
}

func (retrier) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (retrier) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// stopped is the error of a retry loop that ended with err: when the
// caller's context ended during a wait (go-retry then returns the
// context's error), the last refusal wrapped with it, so that its code
// and reason stay readable and errors.Is(err, context.Canceled) holds.
func stopped(ctx context.Context, err, last error) error {
	if err == nil || last == nil || ctx.Err() == nil || errors.Is(err, last) {
		return err
	}
	return fmt.Errorf("%w (stopped retrying: %w)", last, err)
}
