package gate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// read answers a user's state for the listed channels (all when empty),
// in channel order.
//
// Redis answers alone only when the user's hash is complete (hydrated since
// it was last lost). Otherwise Postgres is read and the answer is the
// field-wise max of both: Redis may hold acknowledged marks the persister has
// not written yet, Postgres what Redis lost. With Redis up, the user's whole
// durable state is then max-merged into the hash, which marks it complete; a
// newer value written meanwhile wins the merge, so the hydrate cannot undo it.
func (g *Gate) read(ctx context.Context, user string, channels []string, page redisstore.Page) (*connect.Response[receiptsv1.GetReadStateResponse], error) {
	// Repeated channel ids are answered once.
	channels = batch.Dedupe(channels, func(id string) string { return id }, func(kept, _ string) string { return kept })

	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	cached, complete, rerr := g.redis.Get(rctx, user, channels)
	cancel()
	if rerr == nil && complete {
		return readResponse(user, cached, page), nil
	}
	reason := "incomplete"
	if rerr != nil {
		reason = "redis_error"
		cached = nil
		g.m.redisDegraded.WithLabelValues(redisOpGet).Inc()
		g.warnRedis(redisOpGet, rerr)
	}
	g.m.readFallbacks.WithLabelValues(reason).Inc()

	// Hydrating marks the hash complete, so it needs all of the user's
	// rows; without Redis only the asked channels are worth reading.
	pgChannels := channels
	if rerr == nil {
		pgChannels = nil
	}
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	durable, perr := g.pg.Get(pctx, user, pgChannels)
	cancel()
	if perr != nil {
		if cerr := contextError(ctx, perr); cerr != nil {
			return nil, cerr
		}
		// Redis alone may be missing or behind on channels: answering with
		// it would show wrong badges without saying so.
		g.log.Warn("reading durable state", zap.String("reason", reason), zap.Error(perr))
		return nil, unavailableError(fmt.Errorf("reading durable state (real-time view %s): %w; retry", strings.ReplaceAll(reason, "_", " "), perr))
	}

	if rerr == nil {
		if len(durable) >= pgstore.MaxChannelsPerRead {
			// The read was truncated: the hash cannot be called complete.
			g.log.Warn("not hydrating a user with too many channels", zap.Int("num_channels", len(durable)))
		} else {
			hctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
			if err := g.redis.Hydrate(hctx, user, durable); err != nil {
				g.m.redisDegraded.WithLabelValues(redisOpHydrate).Inc()
				g.warnRedis(redisOpHydrate, err)
			}
			cancel()
		}
	}
	return readResponse(user, mergeStates(durable, cached, channels), page), nil
}

// mergeStates max-merges the two views per channel and keeps only the
// listed channels (all when none are listed).
func mergeStates(durable, cached []receipt.State, channels []string) []receipt.State {
	byChannel := make(map[string]receipt.State, len(durable)+len(cached))
	for _, s := range durable {
		byChannel[s.Key.Channel] = s
	}
	for _, s := range cached {
		if d, ok := byChannel[s.Key.Channel]; ok {
			s, _ = receipt.Merge(d, s)
		}
		byChannel[s.Key.Channel] = s
	}
	out := make([]receipt.State, 0, len(byChannel))
	if len(channels) == 0 {
		for _, s := range byChannel {
			out = append(out, s)
		}
		return out
	}
	for _, c := range channels {
		if s, ok := byChannel[c]; ok {
			out = append(out, s)
		}
	}
	return out
}

// readResponse answers states in channel order, cut to page (a listed
// read's page is the zero Page: no cut).
func readResponse(user string, states []receipt.State, page redisstore.Page) *connect.Response[receiptsv1.GetReadStateResponse] {
	slices.SortFunc(states, func(a, b receipt.State) int { return strings.Compare(a.Key.Channel, b.Key.Channel) })
	states, more := pageOf(states, func(s receipt.State) string { return s.Key.Channel }, page)
	out := &receiptsv1.GetReadStateResponse{UserId: user, Channels: make([]*receiptsv1.ChannelState, len(states))}
	for i, s := range states {
		out.Channels[i] = event.StateToProto(s)
	}
	if more {
		out.NextPageToken = nextPageToken(states[len(states)-1].Key.Channel)
	}
	return connect.NewResponse(out)
}
