package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// Gate is the kafkagate service: the ReceiptService handler on its
// validate → Redis max-merge → durable write path and its read path.
// pkg/gate/server serves it.
type Gate struct {
	cfg     Config
	log     *zap.Logger
	redis   *redisstore.Store
	pg      *pgstore.Store
	durable Producer
	m       *metrics
	// writes groups concurrent calls' marks into shared writes.
	writes *coalescer[*writeJob]
	// restore puts back what Redis lost before a write or read uses it.
	restore *restorer

	// redisWarn lets the "Redis degraded" log line through once a second:
	// during an outage every call would log it.
	redisWarn rate.Sometimes
	// durableWarn does the same for "making marks durable": a full spool
	// refuses calls fast, and each would log.
	durableWarn rate.Sometimes
	// resolveWarn does the same for marks resolved without a store.
	resolveWarn rate.Sometimes
	// live is the watch streams' state (watch.go).
	live live
	// rebuilds runs one view rebuild per channel at a time (readby.go):
	// concurrent reads of a channel whose view is not loaded share it.
	rebuilds singleflight.Group
	// collecting runs one collection of a user's thread registers at a
	// time (threadcollect.go).
	collecting singleflight.Group
	// hydratingSets runs one background copy of a deletion set at a time
	// (deletionsets.go).
	hydratingSets singleflight.Group
	// rebuildHook, set by tests only, runs as a rebuild starts.
	rebuildHook func()
}

var _ receiptsv1connect.ReceiptServiceHandler = (*Gate)(nil)

// New fills defaults and validates cfg (all problems at once). It starts
// nothing and does not wait for Kafka or Redis: the gate answers while they
// are down and reports not-ready until its producer can make writes
// durable.
func New(cfg Config) (*Gate, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring gate: %w", err)
	}
	m := newMetrics(cfg.Registerer)
	// Every Redis round trip of the gateway waits at most RedisTimeout:
	// bounded once, on its client.
	redisstore.Bound(cfg.Redis, cfg.RedisTimeout)
	g := &Gate{
		cfg:     cfg,
		log:     cfg.Logger.Named("gate"),
		redis:   redisstore.New(cfg.Redis, redisstore.Config{Prefix: cfg.RedisPrefix, Undecodable: m.undecodable}),
		pg:      cfg.Postgres,
		durable: cfg.Producer,
		m:       m,
	}
	g.redisWarn.Interval, g.durableWarn.Interval, g.resolveWarn.Interval = warnInterval, warnInterval, warnInterval
	g.writes = newWriteCoalescer(g)
	g.restore = newRestorer(g, cfg.Restore, cfg.Registerer)
	g.live = newLive(cfg, g.watchTicks)
	return g, nil
}

// nowMs is the gateway's clock (Config.Clock) in Unix milliseconds.
func (g *Gate) nowMs() int64 {
	if g.cfg.Clock != nil {
		return g.cfg.Clock().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// MaxBatchItems is the most receipts one MarkReceipts call may carry.
func (g *Gate) MaxBatchItems() int { return g.cfg.MaxBatchItems }

// CallBound is the longest a write waits on its stores: RedisTimeout, then
// the producer's bound. A server's write timeout must exceed it.
func (g *Gate) CallBound() time.Duration { return g.cfg.RedisTimeout + g.durable.CallBound() }

// Ready reports whether the gate can accept durable writes: its producer
// can make records durable (Kafka answers, or the spool has room). Redis
// being down does not make the gate unready: marks are still made durable
// and answers say the real-time view is degraded; it is named only when
// the gate is not ready anyway.
func (g *Gate) Ready(ctx context.Context) error {
	var (
		wg         sync.WaitGroup
		rerr, perr error
	)
	wg.Go(func() { perr = g.durable.Ready(ctx) })
	wg.Go(func() {
		if err := g.redis.Ping(ctx); err != nil {
			rerr = fmt.Errorf("redis: %w", err)
		}
	})
	wg.Wait()
	if perr == nil {
		return nil
	}
	return errors.Join(perr, rerr)
}

// MarkReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) MarkReceipts(ctx context.Context, req *connect.Request[receiptsv1.MarkReceiptsRequest]) (*connect.Response[receiptsv1.MarkReceiptsResponse], error) {
	marks, err := validateBatch(req.Msg, g.cfg.MaxBatchItems)
	if err != nil {
		return nil, err
	}
	results, err := g.write(ctx, marks)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.MarkReceiptsResponse{Results: results}), nil
}

// MarkRead implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) MarkRead(ctx context.Context, req *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return g.markOne(ctx, req.Msg, receiptsv1.Kind_READ)
}

// MarkDelivered implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) MarkDelivered(ctx context.Context, req *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return g.markOne(ctx, req.Msg, receiptsv1.Kind_DELIVERED)
}

func (g *Gate) markOne(ctx context.Context, r *receiptsv1.MarkRequest, kind receiptsv1.Kind) (*connect.Response[receiptsv1.MarkResponse], error) {
	m, err := validateMark(markInput{
		user: r.GetUserId(), channel: r.GetChannelId(), kind: kind, seq: r.GetSeq(),
		messageID: r.GetMessageId(), deviceID: r.GetDeviceId(), epoch: r.Epoch, private: r.GetPrivate(),
	})
	if err != nil {
		return nil, err
	}
	results, err := g.write(ctx, []mark{m})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.MarkResponse{Result: results[0]}), nil
}

// GetReadState implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetReadState(ctx context.Context, req *connect.Request[receiptsv1.GetReadStateRequest]) (*connect.Response[receiptsv1.GetReadStateResponse], error) {
	if err := validateRead(req.Msg, g.cfg.MaxReadChannels); err != nil {
		return nil, err
	}
	page, err := channelPage(req.Msg.GetPageSize(), req.Msg.GetPageToken(), len(req.Msg.GetChannelId()) > 0)
	if err != nil {
		return nil, err
	}
	return g.read(ctx, req.Msg.GetUserId(), req.Msg.GetChannelId(), page)
}

// redisDegradedOn counts n items whose Redis step op failed with err (the
// answer goes on without the real-time view) and warns of it.
func (g *Gate) redisDegradedOn(ctx context.Context, op string, n int, err error) {
	g.m.redisDegraded.WithLabelValues(op).Add(float64(n))
	g.warnRedis(ctx, op, err)
}

// warnRedis logs a Redis failure at most once a second; the
// redis_degraded_total metric counts every one.
func (g *Gate) warnRedis(ctx context.Context, op string, err error) {
	if redisstore.Classify(err) != errclass.Unavailable {
		// Redis answered and refused the command: a bug or a foreign
		// value under our prefix, not an outage.
		tracing.Logger(ctx, g.log).Error("redis refuses the command; answering from the durable path", zap.String("op", op), zap.Error(err))
		return
	}
	g.redisWarn.Do(func() {
		tracing.Logger(ctx, g.log).Warn("redis degraded; answering from the durable path", zap.String("op", op), zap.Error(err))
	})
}

// warnInterval spaces the gate's repeated warnings: the metrics count
// every occurrence, the log shows one a second.
const warnInterval = time.Second

// contextError maps the caller's own cancellation or deadline to its code,
// so a client that went away is not counted as an outage.
func contextError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return apierr.New(connect.CodeCanceled, apierr.Canceled, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return apierr.New(connect.CodeDeadlineExceeded, apierr.DeadlineExceeded, err)
	}
	return nil
}

// unavailableError is the answer when a store the call needs cannot
// answer: Unavailable (HTTP 503), reason UNAVAILABLE; nothing was
// acknowledged.
func unavailableError(err error, meta ...apierr.Meta) error {
	return apierr.New(connect.CodeUnavailable, apierr.Unavailable, err, meta...)
}

// internal is the answer to a bug (a record that does not encode).
func internal(err error) error { return apierr.New(connect.CodeInternal, apierr.Internal, err) }

// AgreeSettings checks the settings the gateway shares with the persister
// against the ones the deployment stored in Postgres (storing them when
// none is): the detail threshold and the mention cap. It fails only on a
// disagreement; when
// Postgres cannot answer (down, or its migrations still running) it logs
// and returns nil, as the gateway takes marks without Postgres — the
// persister, which cannot, checks at its own start.
func (g *Gate) AgreeSettings(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	defer cancel()
	err := g.pg.AgreeSetting(ctx, pgstore.SettingDetailThreshold, g.cfg.ReadBy.detailThreshold())
	if err == nil {
		err = g.pg.AgreeSetting(ctx, pgstore.SettingMentionCap, int64(g.cfg.MentionCap))
	}
	if errors.Is(err, pgstore.ErrSettingDisagrees) {
		return fmt.Errorf("gate: %w", err)
	}
	if err != nil {
		tracing.Logger(ctx, g.log).Warn("cannot check the shared settings against Postgres; the persister checks them at its start", zap.Error(err))
	}
	return nil
}
