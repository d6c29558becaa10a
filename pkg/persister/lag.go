package persister

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

// LagIntervalDefault is how often the group's lag is exported.
const LagIntervalDefault = 10 * time.Second

// lagExporter publishes the consumer group's lag: per partition, how many
// records the group's committed offset is behind the end of the log. It is
// the figure SREs alert on, and brokers without __consumer_offsets (kfake)
// give external lag exporters nothing to read, so the persister reports it
// itself. Every replica reports the whole group's lag: aggregate with max,
// not sum.
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

// refresh reads committed and end offsets once. A partition without a
// commit counts from the start of its log, so a group that has not begun
// shows its whole backlog.
func (l *lagExporter) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	committed, err := l.adm.FetchOffsets(ctx, l.group)
	if err != nil {
		return err
	}
	ends, err := l.adm.ListEndOffsets(ctx, l.topic)
	if err != nil {
		return err
	}
	starts, err := l.adm.ListStartOffsets(ctx, l.topic)
	if err != nil {
		return err
	}
	var total int64
	ends.Each(func(end kadm.ListedOffset) {
		if end.Err != nil {
			return
		}
		from := int64(0)
		if s, ok := starts.Lookup(l.topic, end.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(l.topic, end.Partition); ok && c.Err == nil && c.At >= 0 {
			from = max(from, c.At)
		}
		lag := max(end.Offset-from, 0)
		total += lag
		l.lag.WithLabelValues(strconv.Itoa(int(end.Partition))).Set(float64(lag))
	})
	l.total.Set(float64(total))
	return nil
}
