// Command devbroker runs a single-node Kafka-protocol broker (franz-go's
// kfake) for local development and the end-to-end tests: it persists to a
// data directory, creates the receipts topics with their configs when they
// are missing, applies retention periodically and writes a clean snapshot
// when stopped with SIGTERM or SIGINT. It is not for production: kfake
// simulates replication in one process (see docs/operations.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/lifecycle"
)

// Defaults.
const (
	ListenPortDefault        = 9092
	DataDirDefault           = ".devdata/kafka"
	TopicDefault             = "read-receipts"
	PartitionsDefault        = 32
	RetentionDefault         = 48 * time.Hour
	DLTTopicDefault          = "read-receipts-dlt"
	DLTPartitionsDefault     = 4
	RetentionIntervalDefault = time.Minute
)

func main() { cli.Main("devbroker", run) }

// keyValues is a repeatable key=value flag.
type keyValues map[string]string

func (kv keyValues) String() string {
	parts := make([]string, 0, len(kv))
	for k, v := range kv {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (kv keyValues) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" {
			return fmt.Errorf("expected key=value, got %q", p)
		}
		kv[k] = v
	}
	return nil
}

type config struct {
	port              int
	dataDir           string
	syncWrites        bool
	topic             string
	partitions        int
	retention         time.Duration
	dltTopic          string
	dltPartitions     int
	dltRetention      time.Duration
	retentionInterval time.Duration
	brokerConfigs     keyValues
	kfakeLogLevel     string
	log               cli.LogFlags
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := config{brokerConfigs: keyValues{}}
	fs := flag.NewFlagSet("devbroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.port, "listen-port", ListenPortDefault, "port to listen on (always 127.0.0.1)")
	fs.StringVar(&cfg.dataDir, "data-dir", DataDirDefault, "directory the broker persists to; empty keeps everything in memory")
	fs.BoolVar(&cfg.syncWrites, "sync-writes", false, "fsync every produce (survives an OS crash; about 4x slower)")
	fs.StringVar(&cfg.topic, "topic", TopicDefault, "receipts topic, created if missing")
	fs.IntVar(&cfg.partitions, "partitions", PartitionsDefault, "partitions of --topic when created")
	fs.DurationVar(&cfg.retention, "retention", RetentionDefault, "retention.ms of --topic when created")
	fs.StringVar(&cfg.dltTopic, "dlt-topic", DLTTopicDefault, "dead-letter topic, created if missing; empty for none")
	fs.IntVar(&cfg.dltPartitions, "dlt-partitions", DLTPartitionsDefault, "partitions of --dlt-topic when created")
	fs.DurationVar(&cfg.dltRetention, "dlt-retention", 0, "retention.ms of --dlt-topic when created; 0 keeps the broker default")
	fs.DurationVar(&cfg.retentionInterval, "retention-interval", RetentionIntervalDefault,
		"how often to apply retention (kfake does not restart its own retention ticker after loading a data dir)")
	fs.Var(cfg.brokerConfigs, "broker-config", "broker config key=value (repeatable or comma-separated)")
	fs.StringVar(&cfg.kfakeLogLevel, "kfake-log-level", "none", "kfake's own log level: none, error, warn, info, debug")
	cfg.log.RegisterFlags(fs)
	cli.RegisterVersionFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.VersionRequested(fs, "devbroker", os.Stdout); err != nil {
		return err
	}
	log, err := cfg.log.New("devbroker")
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	// The one runner every binary uses; the broker has no admin port.
	r := lifecycle.New(lifecycle.Config{Logger: log})
	r.Add("broker", lifecycle.Func(func(ctx context.Context) error { return serve(ctx, cfg, log) }, nil))
	return r.Run(ctx)
}

func kfakeLevel(s string) (kfake.LogLevel, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("unknown kfake log level %q", s)
}

func serve(ctx context.Context, cfg config, log *zap.Logger) error {
	lvl, err := kfakeLevel(cfg.kfakeLogLevel)
	if err != nil {
		return err
	}
	opts := []kfake.Opt{
		kfake.Ports(cfg.port),
		kfake.ClusterID("receipts-dev"),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, lvl)),
	}
	if cfg.dataDir != "" {
		if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
			return fmt.Errorf("creating data dir: %w", err)
		}
		opts = append(opts, kfake.DataDir(cfg.dataDir))
	}
	if cfg.syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if len(cfg.brokerConfigs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(cfg.brokerConfigs))
	}
	start := time.Now()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("starting kfake cluster on 127.0.0.1:%d: %w", cfg.port, err)
	}
	closed := false
	closeCluster := func() {
		if closed {
			return
		}
		closed = true
		t := time.Now()
		c.Close()
		log.Info("stopped", zap.Duration("close_took", time.Since(t)))
	}
	defer closeCluster()
	log.Info("loaded", zap.String("data_dir", cfg.dataDir), zap.Duration("took", time.Since(start)))

	topics := []struct {
		name       string
		partitions int
		retention  time.Duration
	}{
		{cfg.topic, cfg.partitions, cfg.retention},
		{cfg.dltTopic, cfg.dltPartitions, cfg.dltRetention},
	}
	for _, t := range topics {
		if t.name == "" {
			continue
		}
		if err := ensureTopic(c, log, t.name, t.partitions, t.retention); err != nil {
			return err
		}
	}
	log.Info("serving",
		zap.Strings("brokers", c.ListenAddrs()),
		zap.String("data_dir", cfg.dataDir),
		zap.Bool("sync_writes", cfg.syncWrites))

	tick := time.NewTicker(cfg.retentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down: writing snapshot (signal again to force)")
			// A second signal while Close runs exits at once (the default
			// action, restored here), so a stuck close never traps the user.
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			closeCluster()
			return nil
		case <-tick.C:
			c.ApplyRetention()
		}
	}
}

// ensureTopic creates a topic when it is missing, and otherwise reports how
// the existing one differs from the flags (partitions are never shrunk, and
// configs of an existing topic are left as an operator set them).
func ensureTopic(c *kfake.Cluster, log *zap.Logger, name string, partitions int, retention time.Duration) error {
	if info := c.TopicInfo(name); info != nil {
		have := len(c.PartitionInfos(name))
		fields := []zap.Field{zap.String("topic", name), zap.Int("partitions", have)}
		if v := info.Configs["retention.ms"]; v != nil {
			fields = append(fields, zap.String("retention.ms", *v))
		}
		if have != partitions {
			log.Warn("topic exists with a different partition count than --partitions; keeping it", append(fields, zap.Int("flag_partitions", partitions))...)
		} else {
			log.Info("topic exists", fields...)
		}
		return nil
	}
	var configs map[string]string
	if retention > 0 {
		configs = map[string]string{"retention.ms": strconv.FormatInt(retention.Milliseconds(), 10)}
	}
	if err := c.CreateTopic(name, int32(partitions), configs); err != nil {
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return fmt.Errorf("creating topic %s: %w", name, err)
	}
	log.Info("topic created", zap.String("topic", name), zap.Int("partitions", partitions), zap.Any("configs", configs))
	return nil
}
