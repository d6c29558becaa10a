package gate

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/receipt"
)

// Members reports which of channels user is a member of now, for the
// transport's check of an end-user token (it watches or reads receipts
// only of its user's channels). A channel whose membership is not
// tracked (no registered members) counts as not a member: an end-user
// sees no channel nobody let it into. The facts come as for a mark
// (Redis, what it lacks from Postgres); when Redis cannot answer, from
// Postgres alone; when neither can, the error is Unavailable, and the
// caller refuses rather than guesses.
func (g *Gate) Members(ctx context.Context, user string, channels []string) (map[string]bool, error) {
	out := make(map[string]bool, len(channels))
	if len(channels) == 0 {
		return out, nil
	}
	keys := make([]receipt.Key, len(channels))
	for i, ch := range channels {
		keys[i] = receipt.Key{User: user, Channel: ch}
	}
	f := g.lookup(ctx, keys, false)
	if f.known {
		for _, k := range keys {
			member, registered := f.member(k)
			out[k.Channel] = member && registered
		}
		return out, nil
	}
	if err := g.settled(ctx, nil, channels); err != nil {
		return nil, membersUnavailable(ctx, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	regs, err := g.pg.Memberships(pctx, user, channels)
	cancel()
	if err != nil {
		return nil, membersUnavailable(ctx, err)
	}
	for _, r := range regs {
		out[r.Key.Channel] = r.Member
	}
	return out, nil
}

func membersUnavailable(ctx context.Context, err error) error {
	if cerr := contextError(ctx, err); cerr != nil {
		return cerr
	}
	return unavailableError(fmt.Errorf("checking channel membership (Redis and Postgres both failed): %w; retry", err))
}
