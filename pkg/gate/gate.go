package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/gate/channelcalls"
	"github.com/readstate/receipts/pkg/gate/markcalls"
	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/gate/usercalls"
	"github.com/readstate/receipts/pkg/gate/watchcalls"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// Gate is the kafkagate service: the ReceiptService handler on its
// validate → Redis max-merge → durable write path and its read path.
// pkg/gate/server serves it.
type Gate struct {
	*seam.Core
	*readbycalls.ReadBy
	*threadcalls.Threads
	*markcalls.Marks
	*usercalls.Users
	*watchcalls.Watch
	*channelcalls.Channels
}

var _ receiptsv1connect.ReceiptServiceHandler = (*Gate)(nil)

// New fills defaults and validates cfg (all problems at once). It starts
// nothing and does not wait for Kafka or Redis: the gate answers while they
// are down and reports not-ready until its producer can make writes
// durable.
func New(cfg Config) (*Gate, error) {
	core, err := seam.New(cfg)
	if err != nil {
		return nil, err
	}
	readBy := readbycalls.New(core)
	threads, marks := threadcalls.New(core, readBy), markcalls.New(core, readBy)
	g := &Gate{
		Core: core, ReadBy: readBy, Threads: threads, Marks: marks,
		Users: usercalls.New(core, readBy), Watch: watchcalls.New(core, readBy),
		Channels: channelcalls.New(core, readBy, marks, threads),
	}
	for _, add := range partsOf {
		add(g)
	}
	return g, nil
}

// partsOf are the kinds' additions to other calls' answers
// (seam.Parts), each registered by its calls' file when the package
// starts, so that a kind's calls stay in one file.
var partsOf []func(g *Gate)

// MaxBatchItems is the most receipts one MarkReceipts call may carry.
func (g *Gate) MaxBatchItems() int { return g.Cfg.MaxBatchItems }

// CallBound is the longest a write waits on its stores: RedisTimeout, then
// the producer's bound. A server's write timeout must exceed it.
func (g *Gate) CallBound() time.Duration { return g.Cfg.RedisTimeout + g.Durable.CallBound() }

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
	wg.Go(func() { perr = g.Durable.Ready(ctx) })
	wg.Go(func() {
		if err := g.Redis.Ping(ctx); err != nil {
			rerr = fmt.Errorf("redis: %w", err)
		}
	})
	wg.Wait()
	if perr == nil {
		return nil
	}
	return errors.Join(perr, rerr)
}

// AgreeSettings checks the settings the gateway shares with the persister
// against the ones the deployment stored in Postgres (storing them when
// none is): the detail threshold and the mention cap. It fails only on a
// disagreement; when
// Postgres cannot answer (down, or its migrations still running) it logs
// and returns nil, as the gateway takes marks without Postgres — the
// persister, which cannot, checks at its own start.
func (g *Gate) AgreeSettings(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	err := g.PG.AgreeSetting(ctx, pgstore.SettingDetailThreshold, g.Cfg.ReadBy.Threshold())
	if err == nil {
		err = g.PG.AgreeSetting(ctx, pgstore.SettingMentionCap, int64(g.Cfg.MentionCap))
	}
	if errors.Is(err, pgstore.ErrSettingDisagrees) {
		return fmt.Errorf("gate: %w", err)
	}
	if err != nil {
		tracing.Logger(ctx, g.Log).Warn("cannot check the shared settings against Postgres; the persister checks them at its start", zap.Error(err))
	}
	return nil
}
