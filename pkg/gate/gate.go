package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Gate is the kafkagate service: the ReceiptService handler, its Kafka
// producer, and the HTTP handler that serves it on one port.
type Gate struct {
	cfg     Config
	log     *zap.Logger
	kcl     *kgo.Client
	redis   *redisstore.Store
	pg      *pgstore.Store
	durable durableWriter
	m       *metrics
	handler http.Handler

	// lastRedisWarn rate-limits the "Redis degraded" log line to one a
	// second: during an outage every call would log it.
	lastRedisWarn atomic.Int64
}

var _ receiptsv1connect.ReceiptServiceHandler = (*Gate)(nil)

// New fills defaults, validates cfg (all problems at once), and builds the
// producer client and HTTP handler. It does not contact Kafka or Redis: the
// gate starts while they are down and reports not-ready until they answer.
func New(cfg Config) (*Gate, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring gate: %w", err)
	}
	g := &Gate{
		cfg:   cfg,
		log:   cfg.Logger.Named("gate"),
		redis: redisstore.New(cfg.Redis, redisstore.Config{Prefix: cfg.RedisPrefix}),
		pg:    cfg.Postgres,
		m:     newMetrics(cfg.Registerer),
	}
	kc := cfg.Kafka
	if kc.ClientID == "" {
		kc.ClientID = "kafkagate"
	}
	opts := append(kc.Opts(cfg.Logger, cfg.Registerer, kafkaNamespace),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Without it the idempotent producer retries a dead broker forever.
		kgo.RecordDeliveryTimeout(cfg.ProduceTimeout),
		kgo.ProducerLinger(max(cfg.ProduceLinger, 0)),
	)
	kcl, err := kgo.NewClient(append(opts, cfg.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	g.kcl = kcl
	g.durable = &kafkaWriter{cl: kcl, timeout: cfg.ProduceTimeout}
	if g.handler, err = g.buildHandler(); err != nil {
		kcl.Close()
		return nil, err
	}
	return g, nil
}

// Close stops the producer. Call it after the server has drained: every
// answered call has its acks, so nothing acknowledged is lost. The Redis
// client and Postgres store belong to the caller.
func (g *Gate) Close() { g.kcl.Close() }

// Ready reports whether the gate can do its work: Redis answers a ping and
// Kafka answers a metadata request for the topic. The error names what is
// down (both, when both are).
func (g *Gate) Ready(ctx context.Context) error {
	var (
		wg         sync.WaitGroup
		rerr, kerr error
	)
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
		defer cancel()
		if err := g.redis.Ping(rctx); err != nil {
			rerr = fmt.Errorf("redis: %w", err)
		}
	})
	wg.Go(func() {
		if err := g.kafkaReady(ctx); err != nil {
			kerr = fmt.Errorf("kafka: %w", err)
		}
	})
	wg.Wait()
	return errors.Join(rerr, kerr)
}

// kafkaReady asks a broker for the topic's metadata: it proves a broker
// answers and that the topic exists (a missing topic would otherwise show
// only as produce timeouts).
func (g *Gate) kafkaReady(ctx context.Context) error {
	md, err := kadm.NewClient(g.kcl).Metadata(ctx, g.cfg.Topic)
	if err != nil {
		return fmt.Errorf("requesting metadata: %w", err)
	}
	td, ok := md.Topics[g.cfg.Topic]
	switch {
	case !ok:
		return fmt.Errorf("topic %s: not in metadata", g.cfg.Topic)
	case td.Err != nil:
		return fmt.Errorf("topic %s: %w", g.cfg.Topic, td.Err)
	}
	return nil
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
	m, err := validateMark("", r.GetUserId(), r.GetChannelId(), kind, r.GetSeq(), r.GetMessageId(), r.GetDeviceId())
	if err != nil {
		return nil, invalid(err)
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
	return g.read(ctx, req.Msg.GetUserId(), req.Msg.GetChannelId())
}

// warnRedis logs a Redis failure at most once a second; the
// redis_degraded_total metric counts every one.
func (g *Gate) warnRedis(op string, err error) {
	now := time.Now().UnixNano()
	last := g.lastRedisWarn.Load()
	if now-last < int64(time.Second) || !g.lastRedisWarn.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("redis degraded; answering from the durable path", zap.String("op", op), zap.Error(err))
}

// contextError maps the caller's own cancellation or deadline to its code,
// so a client that went away is not counted as an outage.
func contextError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return nil
}
