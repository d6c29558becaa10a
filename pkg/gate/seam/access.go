package seam

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
func (g *Core) Members(ctx context.Context, user string, channels []string) (map[string]bool, error) {
	out := make(map[string]bool, len(channels))
	if len(channels) == 0 {
		return out, nil
	}
	keys := make([]receipt.Key, len(channels))
	for i, ch := range channels {
		keys[i] = receipt.Key{User: user, Channel: ch}
	}
	f := g.Lookup(ctx, keys, false)
	if f.Known {
		for _, k := range keys {
			member, registered := f.Member(k)
			out[k.Channel] = member && registered
		}
		return out, nil
	}
	if err := g.Settled(ctx, nil, channels); err != nil {
		return nil, membersUnavailable(ctx, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	regs, err := g.MemberStore().ReadPG(pctx, user, channels)
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
	if cerr := ContextError(ctx, err); cerr != nil {
		return cerr
	}
	return UnavailableError(fmt.Errorf("checking channel membership (Redis and Postgres both failed): %w; retry", err))
}
