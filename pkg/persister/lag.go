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

// lagExporter publishes the consumer group's lag per partition: the figure
// SREs alert on. Every replica reports the whole group's lag: aggregate
// with max, not sum.
type lagExporter struct {
	adm   *kadm.Client
	group string
	topic string
	lag   *prometheus.GaugeVec
	total prometheus.Gauge
	log   *zap.Logger
}

func newLagExporter(adm *kadm.Client, group, topic string, reg prometheus.Registerer, log *zap.Logger) *lagExporter {
	f := promauto.With(reg)
	return &lagExporter{
		adm: adm, group: group, topic: topic, log: log,
		lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricsNamespace + "_consumer_lag_records",
			Help: "Records between the group's committed offset and the end of each partition (every replica reports the whole group: aggregate with max).",
		}, []string{"partition"}),
		total: f.NewGauge(prometheus.GaugeOpts{
			Name: MetricsNamespace + "_consumer_lag_records_total",
			Help: "The group's lag summed over the topic's partitions.",
		}),
	}
}

// run refreshes the gauges every interval until ctx ends.
func (l *lagExporter) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := l.refresh(ctx); err != nil && ctx.Err() == nil {
			l.log.Debug("reading consumer lag", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh reads the group's lag once (grouplag counts a partition without
// a commit from the start of its log, so a group that has not begun shows
// its whole backlog).
func (l *lagExporter) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lag, err := grouplag.ConsumerLag(ctx, l.adm, l.group, l.topic)
	if err != nil {
		return err
	}
	for _, p := range lag.Partitions {
		l.lag.WithLabelValues(strconv.Itoa(int(p.Partition))).Set(float64(p.Lag))
	}
	l.total.Set(float64(lag.Total))
	return nil
}
