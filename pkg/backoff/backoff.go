// Package backoff is the project's one retry policy shape on top of
// sethvargo/go-retry: capped exponential backoff with jitter, bounded in time
// unless a caller explicitly asks for unbounded retry.
package backoff

import (
	"time"

	"github.com/sethvargo/go-retry"
)

// Config describes a retry policy.
type Config struct {
	// Base is the first wait. Defaults to 100ms.
	Base time.Duration
	// Cap bounds one wait. Defaults to 10s.
	Cap time.Duration
	// JitterPercent randomises each wait by ± this percentage. Defaults to 20.
	JitterPercent uint64
	// MaxDuration bounds the whole retry. Zero means unbounded, which must
	// be a deliberate choice (the persister's outage loop: Kafka holds the
	// backlog, so waiting is always right).
	MaxDuration time.Duration
}

// New returns a fresh backoff for one retry loop.
func (c Config) New() retry.Backoff {
	if c.Base <= 0 {
		c.Base = 100 * time.Millisecond
	}
	if c.Cap <= 0 {
		c.Cap = 10 * time.Second
	}
	if c.JitterPercent == 0 {
		c.JitterPercent = 20
	}
	b := retry.NewExponential(c.Base)
	b = retry.WithJitterPercent(c.JitterPercent, b)
	b = retry.WithCappedDuration(c.Cap, b)
	if c.MaxDuration > 0 {
		b = retry.WithMaxDuration(c.MaxDuration, b)
	}
	return b
}
