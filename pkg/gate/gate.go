package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	"github.com/readstate/receipts/pkg/spool"
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
	// retryAfter is the Retry-After value of Unavailable writes.
	retryAfter string

	// With a spool (SpoolDir): the writer wrapping Kafka, and the replayer.
	spooler   *spoolWriter
	replay    *replayer
	closeOnce sync.Once

	// lastRedisWarn rate-limits the "Redis degraded" log line to one a
	// second: during an outage every call would log it.
	lastRedisWarn atomic.Int64
	// lastDurableWarn does the same for "making marks durable": a full
	// spool refuses calls fast, and each would log.
	lastDurableWarn atomic.Int64
}

var _ receiptsv1connect.ReceiptServiceHandler = (*Gate)(nil)

// New fills defaults, validates cfg (all problems at once), and builds the
// producer client and HTTP handler. It does not wait for Kafka or Redis: the
// gate starts while they are down and reports not-ready until it can take
// durable writes. With a spool it opens the spool (logging what recovery
// found) and starts the replayer, which sends records a previous process
// left there as soon as Kafka answers.
func New(cfg Config) (*Gate, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring gate: %w", err)
	}
	g := &Gate{
		cfg:        cfg,
		log:        cfg.Logger.Named("gate"),
		redis:      redisstore.New(cfg.Redis, redisstore.Config{Prefix: cfg.RedisPrefix}),
		pg:         cfg.Postgres,
		m:          newMetrics(cfg.Registerer),
		retryAfter: strconv.FormatInt(int64(max(1, (cfg.RetryAfter+time.Second-1)/time.Second)), 10),
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
	kw := &kafkaWriter{cl: kcl, timeout: cfg.ProduceTimeout}
	g.durable = kw
	if g.handler, err = g.buildHandler(); err != nil {
		kcl.Close()
		return nil, err
	}
	if cfg.SpoolDir != "" {
		if err := g.openSpool(kw); err != nil {
			kcl.Close()
			return nil, err
		}
	}
	return g, nil
}

// openSpool opens the spool, logs its recovery, registers its metrics, puts
// the spooling writer in front of Kafka and starts the replayer.
func (g *Gate) openSpool(kw *kafkaWriter) error {
	cfg := g.cfg
	sp, err := spool.Open(spool.Config{
		Dir:      cfg.SpoolDir,
		MaxBytes: cfg.SpoolMaxBytes,
		// Segments of 1/16 of the bound give drained space back in steps.
		SegmentBytes:   min(spool.SegmentBytesDefault, max(cfg.SpoolMaxBytes/16, 4<<10)),
		MaxRecordBytes: spoolMaxRecordBytes,
	})
	if err != nil {
		return fmt.Errorf("opening spool in %s: %w", cfg.SpoolDir, err)
	}
	rec := sp.Recovery()
	fields := []zap.Field{
		zap.String("dir", cfg.SpoolDir), zap.Int64("pending_records", rec.Records), zap.Int("segments", rec.Segments),
		zap.Int64("discarded_bytes", rec.DiscardedBytes), zap.Int("damaged_segments", rec.DamagedSegments),
		zap.Bool("checkpoint_lost", rec.CheckpointLost),
	}
	if rec.DiscardedBytes > 0 || rec.CheckpointLost {
		// Discarded bytes are appends that never returned (a crash):
		// nothing acknowledged. A lost checkpoint replays records twice.
		g.log.Warn("spool opened; recovered from a crash", fields...)
	} else {
		g.log.Info("spool opened", fields...)
	}
	g.m.addSpool(cfg.Registerer, sp)
	g.spooler = &spoolWriter{kafka: kw, sp: sp, after: cfg.callBound(), m: g.m, log: g.log.Named("spool")}
	g.durable = g.spooler
	g.replay = &replayer{
		sp:        sp,
		kafka:     kw,
		topic:     cfg.Topic,
		delivered: g.spooler.delivered,
		m:         g.m,
		log:       g.log.Named("replay"),
	}
	g.replay.start()
	return nil
}

// Close stops the replayer, closes the spool and stops the producer. Call
// it after the server has drained: every answered call has its acks or its
// fsync, so nothing acknowledged is lost; spooled records not yet replayed
// stay in the spool for the next start. The Redis client and Postgres store
// belong to the caller. Calls after the first do nothing.
func (g *Gate) Close() {
	g.closeOnce.Do(func() {
		if g.replay != nil {
			g.replay.stop()
			if err := g.spooler.sp.Close(); err != nil {
				g.log.Warn("closing spool", zap.Error(err))
			}
		}
		g.kcl.Close()
	})
}

// Ready reports whether the gate can accept durable writes: Kafka answers a
// metadata request for the topic, or the spool has room. Redis being down
// does not make the gate unready: marks are still made durable and answers
// say the real-time view is degraded. The error names what is down.
func (g *Gate) Ready(ctx context.Context) error {
	var serr error
	if g.spooler != nil {
		if serr = g.spooler.hasRoom(); serr == nil {
			return nil
		}
		serr = fmt.Errorf("spool: %w", serr)
	}
	var (
		wg         sync.WaitGroup
		rerr, kerr error
	)
	wg.Go(func() {
		if err := g.kafkaReady(ctx); err != nil {
			kerr = fmt.Errorf("kafka: %w", err)
		}
	})
	// Only to name it too when the gate is not ready anyway.
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
		defer cancel()
		if err := g.redis.Ping(rctx); err != nil {
			rerr = fmt.Errorf("redis: %w", err)
		}
	})
	wg.Wait()
	if kerr == nil {
		return nil
	}
	if serr == nil {
		serr = errors.New("spool: not configured")
	}
	return errors.Join(kerr, serr, rerr)
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
	if !redisstore.IsRetryable(err) {
		// Redis answered and refused the command: a bug or a foreign
		// value under our prefix, not an outage.
		g.log.Error("redis refuses the command; answering from the durable path", zap.String("op", op), zap.Error(err))
		return
	}
	if everySecond(&g.lastRedisWarn) {
		g.log.Warn("redis degraded; answering from the durable path", zap.String("op", op), zap.Error(err))
	}
}

// everySecond reports whether a second has passed since it last returned
// true for last.
func everySecond(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	l := last.Load()
	return now-l >= int64(time.Second) && last.CompareAndSwap(l, now)
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
