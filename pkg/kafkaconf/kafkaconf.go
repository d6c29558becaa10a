// Package kafkaconf builds franz-go client options from the one Kafka
// connection config every binary shares (seeds, client id, consumer-group
// session, TLS and SASL), registers its command-line flags, and sorts Kafka
// errors into classes (Classify).
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
	// TLS is TLS to the brokers; off by default.
	TLS TLSConfig
	// SASL authenticates the client; off by default.
	SASL SASLConfig
}

// RegisterFlags registers the connection flags, with the config's current
// values as defaults (Brokers falls back to BrokersDefault): --brokers,
// --client-id, --kafka-tls, --kafka-tls-ca-file, --kafka-tls-cert-file,
// --kafka-tls-key-file, --kafka-tls-server-name, --kafka-sasl-mechanism,
// --kafka-sasl-username and --kafka-sasl-password. The mechanism flag's
// value has a Validate method that checks the whole config (Config.Validate);
// cli.Parse calls it once every flag and variable is set, so a bad
// combination stops a binary at start-up.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{BrokersDefault}
	}
	fs.Var((*list)(&c.Brokers), "brokers", "Kafka seed brokers, a comma-separated `host:port` list")
	fs.StringVar(&c.ClientID, "client-id", c.ClientID, "Kafka client id")
	fs.BoolVar(&c.TLS.Enabled, "kafka-tls", c.TLS.Enabled, "TLS to the Kafka brokers (verified by the system roots, or --kafka-tls-ca-file)")
	fs.StringVar(&c.TLS.CAFile, "kafka-tls-ca-file", c.TLS.CAFile, "PEM `file` of the CA that signs the brokers' certificates (default: the system roots)")
	fs.StringVar(&c.TLS.CertFile, "kafka-tls-cert-file", c.TLS.CertFile, "PEM `file` of the client certificate, for brokers that require mutual TLS (with --kafka-tls-key-file)")
	fs.StringVar(&c.TLS.KeyFile, "kafka-tls-key-file", c.TLS.KeyFile, "PEM `file` of the client certificate's private key")
	fs.StringVar(&c.TLS.ServerName, "kafka-tls-server-name", c.TLS.ServerName, "name verified in the brokers' certificates (default: each broker's host)")
	fs.Var(mechanismValue{c}, "kafka-sasl-mechanism", "SASL mechanism: "+strings.Join(SASLMechanisms, ", ")+", or empty for none")
	fs.StringVar(&c.SASL.Username, "kafka-sasl-username", c.SASL.Username, "SASL username")
	fs.Var(secretValue{&c.SASL.Password}, "kafka-sasl-password", "SASL password (prefer the environment variable, filled from a Secret)")
}

// mechanismValue is the --kafka-sasl-mechanism flag; its Validate checks
// the whole connection config after parsing (see RegisterFlags).
type mechanismValue struct{ c *Config }

func (v mechanismValue) String() string {
	if v.c == nil {
		return ""
	}
	return v.c.SASL.Mechanism
}

func (v mechanismValue) Set(s string) error {
	v.c.SASL.Mechanism = strings.ToUpper(strings.TrimSpace(s))
	return nil
}

// Validate is Config.Validate.
func (v mechanismValue) Validate() error { return v.c.Validate() }

// secretValue is a flag that never shows its value (in -h, in errors).
type secretValue struct{ p *string }

func (v secretValue) String() string {
	if v.p == nil || *v.p == "" {
		return ""
	}
	return "<redacted>"
}

func (v secretValue) Set(s string) error {
	*v.p = s
	return nil
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
// producer's default, stated here so it is never weakened), TLS and SASL, a
// kzap logger one level down, and kprom client metrics named
// receipts_<subsystem>_… on reg. Component options are appended by the
// caller. With an invalid TLS or SASL config (see Validate) every
// connection fails with an ErrConfig error.
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
	opts = append(opts, c.securityOpts()...)
	if logger != nil {
		if err := c.Validate(); err != nil {
			logger.Error("kafka connection config; every connection will fail", zap.Error(err))
		} else if strings.EqualFold(c.SASL.Mechanism, SASLPlain) && !c.TLS.Enabled {
			logger.Warn("SASL PLAIN without --kafka-tls sends the password in clear text")
		}
		opts = append(opts, kgo.WithLogger(kzap.New(logger.Named("kgo"), kzap.AtomicLevel(zap.NewAtomicLevelAt(zapcore.WarnLevel)))))
	}
	if reg != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics(MetricsNamespace, kprom.Subsystem(subsystem), kprom.Registerer(gaugeSuffixFixer{reg}),
			// Records and batches too: the dashboard's throughput panels
			// read produce_records_total.
			kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.UncompressedBytes, kprom.Records, kprom.Batches))))
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
