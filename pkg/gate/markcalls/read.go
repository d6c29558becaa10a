package markcalls

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
	"github.com/readstate/receipts/pkg/views/unread"
)

// read answers a user's state for the listed channels (all when empty),
// in channel order.
//
// Redis answers alone only when the user's hash is loaded (restored since
// it was last lost). Otherwise the hash is restored from Postgres first
// (seam/restore.go: once the persister has written what was in flight when
// Redis lost it) and Redis answers. Without Redis the answer is the
// field-wise max of Postgres and what Redis answered, once Postgres holds
// what was in flight when the read began.
func (g *Marks) read(ctx context.Context, user string, channels []string, page unread.Page) (*connect.Response[receiptsv1.GetReadStateResponse], error) {
	// Repeated channel ids are answered once.
	channels = batch.Dedupe(channels, func(id string) string { return id }, func(kept, _ string) string { return kept })

	get := func() ([]receipt.State, bool, error) {
		// Redis is behind a degraded write until the user is unloaded.
		if err := g.Restore.SettleDegraded(ctx, []string{user}); err != nil {
			return nil, false, err
		}
		states, complete, err := g.CursorStore().Get(ctx, user, channels)
		if err == nil {
			// What the master answered may not be on its replicas yet.
			err = g.ConfirmRead(ctx, user)
		}
		return states, complete, err
	}
	cached, complete, rerr := get()
	if rerr == nil && complete {
		return readResponse(user, cached, page), nil
	}
	reason := "incomplete"
	if rerr == nil {
		err := g.Restore.Cursors(ctx, []string{user})
		if err == nil {
			if cached, complete, rerr = get(); rerr == nil && complete {
				g.M.ReadFallbacks.WithLabelValues(reason).Inc()
				return readResponse(user, cached, page), nil
			}
		}
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		if err != nil && !errors.Is(err, redisstore.ErrUnavailable) {
			// Postgres may be behind what Redis lost: no answer rather
			// than one that goes back.
			tracing.Logger(ctx, g.Log).Warn("restoring read state Redis lost", zap.Error(err))
			return nil, seam.UnavailableError(fmt.Errorf("reading durable state (real-time view incomplete): %w; retry", err))
		}
	}
	if errors.Is(rerr, seam.ErrReadNotConfirmed) {
		return nil, seam.UnavailableError(fmt.Errorf("reading read state: %w; retry", rerr), apierr.RetryAfter(g.Cfg.RetryAfter))
	}
	if rerr != nil {
		reason = "redis_error"
		cached = nil
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, rerr)
	}
	g.M.ReadFallbacks.WithLabelValues(reason).Inc()

	durable, err := g.durableStates(ctx, user, channels)
	if err != nil {
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		// Redis alone may be missing or behind on channels: answering with
		// it would show wrong badges without saying so.
		tracing.Logger(ctx, g.Log).Warn("reading durable state", zap.String("reason", reason), zap.Error(err))
		return nil, seam.UnavailableError(fmt.Errorf("reading durable state (real-time view %s): %w; retry", strings.ReplaceAll(reason, "_", " "), err))
	}
	return readResponse(user, mergeStates(durable, cached, channels), page), nil
}

// durableStates reads a user's states from Postgres (the listed channels,
// else the first pgstore.MaxChannelsPerRead) once it holds what may be
// in flight.
func (g *Marks) durableStates(ctx context.Context, user string, channels []string) ([]receipt.State, error) {
	if _, err := g.Restore.Settle(ctx, g.CursorStore().RedisKey(user)); err != nil {
		return nil, err
	}
	// Redis may be up, with nothing lost, and behind a degraded write.
	if err := g.Restore.CatchUpDegraded(ctx, user); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	return cursors.NewPostgres(g.PG).Get(pctx, user, channels)
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
func readResponse(user string, states []receipt.State, page unread.Page) *connect.Response[receiptsv1.GetReadStateResponse] {
	slices.SortFunc(states, func(a, b receipt.State) int { return strings.Compare(a.Key.Channel, b.Key.Channel) })
	states, more := seam.PageOf(states, func(s receipt.State) string { return s.Key.Channel }, page)
	out := &receiptsv1.GetReadStateResponse{UserId: user, Channels: make([]*receiptsv1.ChannelState, len(states))}
	for i, s := range states {
		out.Channels[i] = event.StateToProto(s)
	}
	if more {
		out.NextPageToken = seam.NextPageToken(states[len(states)-1].Key.Channel)
	}
	return connect.NewResponse(out)
}
