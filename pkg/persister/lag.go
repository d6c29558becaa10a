package persister

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/grouplag"
)

// LagIntervalDefault is how often the group's lag is exported.
const LagIntervalDefault = 10 * time.Second

// LagExporter publishes the consumer group's lag per partition, the figure
// SREs alert on, as a lifecycle component. Every replica reports the whole
// group's lag: aggregate with max by partition, then sum.
type LagExporter struct {
	adm      *kadm.Client
	group    string
	topic    string
	interval time.Duration
	lag      *prometheus.GaugeVec
	log      *zap.Logger
}

func newLagExporter(adm *kadm.Client, group, topic string, interval time.Duration, reg prometheus.Registerer, log *zap.Logger) *LagExporter {
	f := promauto.With(reg)
	return &LagExporter{
		adm: adm, group: group, topic: topic, interval: interval, log: log,
		lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "consumer_lag_records",
			Help: "Records between the group's committed offset and the end of each partition (every replica reports the whole group: aggregate with max by partition).",
		}, []string{"partition"}),
	}
}

// Ready is always nil: lag is best effort, and a lag that cannot be read
// says nothing about whether the persister can write.
func (*LagExporter) Ready(context.Context) error { return nil }

// Run refreshes the gauges every interval until ctx ends.
func (l *LagExporter) Run(ctx context.Context) error {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		if err := l.refresh(ctx); err != nil && ctx.Err() == nil {
			l.log.Debug("reading consumer lag", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// refresh reads the group's lag once (grouplag counts a partition without
// a commit from the start of its log, so a group that has not begun shows
// its whole backlog).
func (l *LagExporter) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lag, err := grouplag.ConsumerLag(ctx, l.adm, l.group, l.topic)
	if err != nil {
		return err
	}
	for _, p := range lag.Partitions {
		l.lag.WithLabelValues(strconv.Itoa(int(p.Partition))).Set(float64(p.Lag))
	}
	return nil
}
