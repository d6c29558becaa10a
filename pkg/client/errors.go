package client

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apierr"
)

// Reason is the stable reason of err's google.rpc.ErrorInfo (domain
// receipts.v1): "HEAD_BEHIND", "INVALID_ID", "RATE_LIMITED" … (the
// constants of pkg/apierr; docs/api.md, "Errors", lists them). "" when
// err carries none: nil, or a failure that never reached the gateway.
// Branch on it, never on the message.
func Reason(err error) string { return string(apierr.ReasonOf(err)) }

// IsRetryable reports whether err says "the same call may succeed later":
// Unavailable (a store or the gateway cannot answer now, or the
// connection failed), ResourceExhausted with reason RATE_LIMITED, or with
// reason STREAM_LIMIT and a Retry-After (the caller's own watch streams),
// and Aborted with reason HEAD_BEHIND (the message's notice has not
// arrived yet). Every other code is the caller's to fix: InvalidArgument,
// PermissionDenied, Unauthenticated, NotFound, FailedPrecondition … A call
// that is not idempotent needs more than this to be retried (Retried).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return true
	case connect.CodeResourceExhausted:
		switch apierr.ReasonOf(err) {
		case apierr.RateLimited:
			return true
		case apierr.StreamLimit:
			return RetryAfter(err) > 0
		}
	case connect.CodeAborted:
		return apierr.ReasonOf(err) == apierr.HeadBehind
	}
	return false
}

// RetryAfter is the pause the server asked for before a retry: its
// Retry-After header (a gRPC trailer), else the ErrorInfo's
// retry_after_seconds; 0 when it gave none.
func RetryAfter(err error) time.Duration {
	cerr, ok := errors.AsType[*connect.Error](err)
	if !ok {
		return 0
	}
	if d, ok := parseRetryAfter(cerr.Meta().Get("Retry-After")); ok {
		return d
	}
	if d, ok := parseRetryAfter(apierr.InfoOf(err).GetMetadata()[apierr.KeyRetryAfter]); ok {
		return d
	}
	return 0
}

// parseRetryAfter reads a Retry-After value: delay seconds (what the
// gateway sends) or an HTTP date. Seconds are capped at an hour, so that
// a wild value cannot overflow; the caller's deadline bounds the wait
// anyway.
func parseRetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}
