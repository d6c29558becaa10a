package readby

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/redisstore"
)

var (
	//go:embed erase.lua
	luaErase    string
	eraseScript = redis.NewScript(luaErase)
)

// Erase cleans user out of channel ch's view (erase.lua), in the
// erasure's step of each channel the user had state in
// (redisstore.Store.Erase and FinishErasures, whose redact runs it, see
// Redact): a failure leaves the channel pending, and the retry does it
// again, which is harmless.
func (s Store) Erase(ctx context.Context, user, ch string, nowMs int64) error {
	var cmd *redis.Cmd
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		cmd = eraseScript.EvalSha(ctx, pipe, s.ErasedKeys(ch), user, strconv.FormatInt(nowMs, 10))
	}); err != nil {
		return err
	}
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("%w: erasing %s from the view of %s: %w", redisstore.ErrUnavailable, user, ch, err)
	}
	return nil
}

// Redact is an erasure's cleaning of each channel: the kinds' first
// (kinds: kind.RedisRedact; nil: none), among them the removal of the
// user's membership register from the channel's hash, which the view's
// apply script reads, so that no move applied after the view's cleaning
// finds the user a member; then the view's (Erase, at nowMs).
func (s Store) Redact(nowMs int64, kinds redisstore.Redact) redisstore.Redact {
	return func(ctx context.Context, user, ch string) error {
		if kinds != nil {
			if err := kinds(ctx, user, ch); err != nil {
				return err
			}
		}
		return s.Erase(ctx, user, ch, nowMs)
	}
}
