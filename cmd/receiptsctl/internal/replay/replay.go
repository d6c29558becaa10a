// Package replay re-applies parked dead letters for receiptsctl's dlt
// replay: it repairs decodable ones directly (pkg/repair) and re-produces
// the others to the main topic, for a newer build to take.
package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/repair"
)

// Mode chooses how a parked record is replayed.
type Mode string

// Replay modes.
const (
	// Auto repairs decodable records directly and re-produces the
	// others to the main topic (a newer build may decode them).
	Auto Mode = "auto"
	// Repair only repairs directly; undecodable records fail and stay
	// parked.
	Repair Mode = "repair"
	// Produce re-produces every record to the main topic, for the
	// persister to take again.
	Produce Mode = "produce"
)

// Outcome says what a replay did.
type Outcome string

// Replay outcomes.
const (
	Repaired Outcome = "repaired"
	Produced Outcome = "produced"
)

var (
	// ErrAlreadyReplayed means the record was replayed before.
	ErrAlreadyReplayed = errors.New("already replayed")
	// ErrNoProducer means a replay had to produce but has no Kafka client.
	ErrNoProducer = errors.New("replaying to the topic needs a Kafka producer")
)

// Config configures a Replayer.
type Config struct {
	// Postgres holds the parked records and receives repairs. Required.
	Postgres *pgstore.Store
	// Redis is read before and merged after a repair. Optional: nil
	// repairs Postgres only (the drift sweep brings Redis along).
	Redis *redisstore.Store
	// Producer re-produces records. Optional unless a record must be
	// produced.
	Producer *kgo.Client
	// Topic is the main topic. Defaults to event.TopicDefault.
	Topic string
	// Mode defaults to Auto.
	Mode Mode
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Replayer re-applies parked records for an operator.
type Replayer struct {
	cfg Config
	rep *repair.Repairer
}

// NewReplayer validates the config.
func NewReplayer(cfg Config) (*Replayer, error) {
	if cfg.Postgres == nil {
		return nil, errors.New("configuring replay: Postgres is required")
	}
	if cfg.Topic == "" {
		cfg.Topic = event.TopicDefault
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = Auto
	case Auto, Repair, Produce:
	default:
		return nil, fmt.Errorf("configuring replay: unknown mode %q (auto, repair or produce)", cfg.Mode)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Replayer{cfg: cfg, rep: &repair.Repairer{Postgres: cfg.Postgres, Redis: cfg.Redis, Logger: cfg.Logger.Named("replay")}}, nil
}

// Replay applies one parked record and marks it replayed. A pending record
// is required: a replayed one returns ErrAlreadyReplayed.
func (r *Replayer) Replay(ctx context.Context, rec parked.Record) (Outcome, error) {
	if rec.ReplayedAt != nil {
		return "", fmt.Errorf("replaying parked record %d: %w at %s", rec.ID, ErrAlreadyReplayed, rec.ReplayedAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	d, decErr := r.rep.Decode(&kgo.Record{Key: rec.Key, Value: rec.Value})
	var outcome Outcome
	switch {
	case r.cfg.Mode == Produce || (r.cfg.Mode == Auto && decErr != nil):
		if r.cfg.Producer == nil {
			return "", fmt.Errorf("replaying parked record %d: %w", rec.ID, ErrNoProducer)
		}
		out := event.Replayed(r.cfg.Topic, rec.ID, rec.Key, rec.Value)
		if err := r.cfg.Producer.ProduceSync(ctx, out).FirstErr(); err != nil {
			return "", fmt.Errorf("producing parked record %d to %s: %w", rec.ID, r.cfg.Topic, err)
		}
		outcome = Produced
	case decErr != nil:
		return "", fmt.Errorf("replaying parked record %d: %w", rec.ID, decErr)
	default:
		if err := r.rep.RepairDecoded(ctx, d); err != nil {
			return "", fmt.Errorf("replaying parked record %d: %w", rec.ID, err)
		}
		outcome = Repaired
	}
	marked, err := parked.New(r.cfg.Postgres).MarkReplayed(ctx, rec.ID)
	if err != nil {
		return outcome, err
	}
	if !marked {
		// Someone replayed it meanwhile; applying it twice is harmless.
		return outcome, fmt.Errorf("marking parked record %d replayed: %w", rec.ID, ErrAlreadyReplayed)
	}
	return outcome, nil
}

// ReplayID reads one parked record and replays it.
func (r *Replayer) ReplayID(ctx context.Context, id int64) (Outcome, error) {
	rec, err := parked.New(r.cfg.Postgres).Get(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Replay(ctx, rec)
}

// ReplayAll replays every pending parked record in id order, calling each
// (when not nil) after every record. A failed record stays parked and the
// walk goes on; only a failure to list stops it.
func (r *Replayer) ReplayAll(ctx context.Context, each func(parked.Record, Outcome, error)) (replayed, failed int, err error) {
	var after int64
	for {
		page, err := parked.New(r.cfg.Postgres).List(ctx, parked.Query{AfterID: after, Limit: 100})
		if err != nil {
			return replayed, failed, err
		}
		if len(page) == 0 {
			return replayed, failed, nil
		}
		for _, rec := range page {
			if ctx.Err() != nil {
				return replayed, failed, ctx.Err()
			}
			out, err := r.Replay(ctx, rec)
			if err != nil {
				failed++
			} else {
				replayed++
			}
			if each != nil {
				each(rec, out, err)
			}
			after = rec.ID
		}
	}
}
