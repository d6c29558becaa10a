// Package kafkaconf builds franz-go client options from the one Kafka
// connection config every binary shares (seeds, client id, consumer-group
// session), registers its command-line flags, and sorts Kafka errors into
// classes (Classify).
package kafkaconf

import (
	"flag"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults.
const (
	// BrokersDefault is the dev broker.
	BrokersDefault = "127.0.0.1:9092"
	// SessionTimeoutDefault is the consumer services' session timeout:
	// short enough that a crashed member's partitions move within seconds,
	// long enough to ride out a GC pause or a slow broker.
	SessionTimeoutDefault = 10 * time.Second
	// MetricsNamespace starts the client metrics' names.
	MetricsNamespace = "receipts"
)

// Config is the Kafka connection config.
type Config struct {
	// Brokers are the seed brokers. Defaults to BrokersDefault.
	Brokers []string
	// ClientID names the client in broker logs and metrics.
	ClientID string
	// SessionTimeout is how long a consumer-group member may go silent
	// before the group gives its partitions to others: after a crash
	// (kill -9) nothing is consumed from them for this long. Heartbeats
	// are sent every SessionTimeout/10. Zero keeps kgo's default (45s).
	SessionTimeout time.Duration
}

// RegisterFlags registers --brokers and --client-id, with the config's
// current values as defaults (Brokers falls back to BrokersDefault).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{BrokersDefault}
	}
	fs.Var((*list)(&c.Brokers), "brokers", "Kafka seed brokers, a comma-separated `host:port` list")
	fs.StringVar(&c.ClientID, "client-id", c.ClientID, "Kafka client id")
}

// RegisterGroupFlags registers --session-timeout, for the binaries that
// join a consumer group (default SessionTimeoutDefault).
func (c *Config) RegisterGroupFlags(fs *flag.FlagSet) {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = SessionTimeoutDefault
	}
	fs.DurationVar(&c.SessionTimeout, "session-timeout", c.SessionTimeout, "consumer-group session timeout: how long a crashed member holds its partitions")
}

// Opts returns the base options: seeds, client id, acks=all (the idempotent
// producer's default, stated here so it is never weakened), a kzap logger
// one level down, and kprom client metrics named receipts_<subsystem>_… on
// reg. Component options are appended by the caller.
func (c Config) Opts(logger *zap.Logger, reg prometheus.Registerer, subsystem string) []kgo.Opt {
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
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics(MetricsNamespace, kprom.Subsystem(subsystem), kprom.Registerer(gaugeSuffixFixer{reg}))))
	}
	if c.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(c.SessionTimeout),
			kgo.HeartbeatInterval(max(c.SessionTimeout/10, 100*time.Millisecond)))
	}
	return opts
}

// list is a comma-separated string list flag value.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated values.
func (l *list) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
