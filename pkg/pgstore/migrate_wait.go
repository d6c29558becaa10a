package pgstore

import (
	"context"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/readstate/receipts/pkg/backoff"
)

// MigrateWhenReachable applies the migrations, waiting for as long as
// Postgres cannot be reached (a pod may start before its database); every
// other error ends it at once. onWait, when set, hears each failed attempt.
func (s *Store) MigrateWhenReachable(ctx context.Context, onWait func(error)) ([]string, error) {
	var applied []string
	err := retry.Do(ctx, backoff.Config{Base: 500 * time.Millisecond, Cap: 10 * time.Second}.New(), func(ctx context.Context) error {
		var err error
		applied, err = s.Migrate(ctx)
		if err == nil || !IsUnreachable(err) {
			return err
		}
		if onWait != nil {
			onWait(err)
		}
		return retry.RetryableError(err)
	})
	return applied, err
}
