package apiauth

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apierr"
)

// unauthenticated is the guard's refusal of a caller without valid
// credentials (HTTP 401 / Unauthenticated), with the challenge header.
func unauthenticated(reason apierr.Reason, msg string) *connect.Error {
	cerr := apierr.New(connect.CodeUnauthenticated, reason, errors.New(msg))
	cerr.Meta().Set("WWW-Authenticate", `Bearer realm="receipts"`)
	return cerr
}

// RateLimited is a refused Charge as the API's error: ResourceExhausted
// (HTTP 429), reason RATE_LIMITED, with the *RateLimitedError's
// Retry-After.
func RateLimited(err error) *connect.Error {
	var meta []apierr.Meta
	if rl, ok := errors.AsType[*RateLimitedError](err); ok && rl.RetryAfter > 0 {
		meta = append(meta, apierr.RetryAfter(rl.RetryAfter))
	}
	return apierr.New(connect.CodeResourceExhausted, apierr.RateLimited, err, meta...)
}
