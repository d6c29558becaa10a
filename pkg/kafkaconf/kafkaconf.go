// Package kafkaconf builds franz-go client options from one config shared by
// the three services: seeds, client id, acks=all, a kzap logger one level
// down, and kprom client metrics on the injected registry.
package kafkaconf

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BrokersDefault is the dev broker.
const BrokersDefault = "127.0.0.1:9092"

// Config is the Kafka connection config.
type Config struct {
	// Brokers are the seed brokers. Defaults to BrokersDefault.
	Brokers []string
	// ClientID names the client in broker logs and metrics.
	ClientID string
	// Fast shortens metadata refresh and retry backoff, for tests and the
	// dev stack where brokers restart often.
	Fast bool
	// SessionTimeout is how long a consumer-group member may go silent
	// before the group gives its partitions to others: after a crash
	// (kill -9) nothing is consumed from them for this long. Heartbeats
	// are sent every SessionTimeout/10. Zero keeps kgo's default (45s).
	SessionTimeout time.Duration
}

// SessionTimeoutDefault is the consumer services' session timeout: short
// enough that a crashed member's partitions move within seconds, long
// enough to ride out a GC pause or a slow broker.
const SessionTimeoutDefault = 10 * time.Second

// Opts returns the base options: seeds, client id, acks=all (the idempotent
// producer's default, stated here so it is never weakened), logging and
// metrics. Component options are appended by the caller.
func (c Config) Opts(logger *zap.Logger, reg prometheus.Registerer, namespace string) []kgo.Opt {
	brokers := c.Brokers
	if len(brokers) == 0 {
		brokers = []string{BrokersDefault}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if logger != nil {
		opts = append(opts, kgo.WithLogger(kzap.New(logger.Named("kgo"), kzap.AtomicLevel(zap.NewAtomicLevelAt(zapcore.WarnLevel)))))
	}
	if reg != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics(namespace, kprom.Registerer(reg))))
	}
	if c.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(c.SessionTimeout),
			kgo.HeartbeatInterval(max(c.SessionTimeout/10, 100*time.Millisecond)))
	}
	if c.Fast {
		opts = append(opts,
			kgo.MetadataMinAge(100*time.Millisecond),
			kgo.MetadataMaxAge(5*time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.FetchMaxWait(200*time.Millisecond),
			kgo.HeartbeatInterval(500*time.Millisecond),
		)
	}
	return opts
}
