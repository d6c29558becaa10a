package persister

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/grouplag"
)

// LagIntervalDefault is how often the group's lag is exported.
const LagIntervalDefault = 10 * time.Second

// LagExporter publishes the consumer group's lag per partition, the figure
// SREs alert on, as a lifecycle component: in records, and in seconds (the
// age of the oldest record the group has not consumed). Every replica
// reports the whole group's lag: aggregate with max by partition, then
// sum. It has a Kafka client of its own: the one-batch fetches that read
// record timestamps must not queue behind the consumer's long polls.
type LagExporter struct {
	cl         *kgo.Client
	adm        *kadm.Client
	group      string
	topic      string
	interval   time.Duration
	lag        *prometheus.GaugeVec
	lagSeconds *prometheus.GaugeVec
	log        *zap.Logger
	now        func() time.Time
}

func newLagExporter(cl *kgo.Client, group, topic string, interval time.Duration, reg prometheus.Registerer, log *zap.Logger) *LagExporter {
	f := promauto.With(reg)
	return &LagExporter{
		cl: cl, adm: kadm.NewClient(cl), group: group, topic: topic, interval: interval, log: log, now: time.Now,
		lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "consumer_lag_records",
			Help: "Records between the group's committed offset and the end of each partition (every replica reports the whole group: aggregate with max by partition).",
		}, []string{"partition"}),
		lagSeconds: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "consumer_lag_seconds",
			Help: "Age of the oldest record the group has not consumed in each partition (now minus the timestamp of the record at the committed offset), 0 when caught up.",
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
// its whole backlog), then the timestamps of the oldest unconsumed records
// of the partitions that lag. A partition whose timestamp cannot be read
// keeps its last age.
func (l *LagExporter) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lag, err := grouplag.ConsumerLag(ctx, l.adm, l.group, l.topic)
	if err != nil {
		return err
	}
	oldest := map[int32]int64{}
	for _, p := range lag.Partitions {
		label := strconv.Itoa(int(p.Partition))
		l.lag.WithLabelValues(label).Set(float64(p.Lag))
		if p.Lag > 0 {
			oldest[p.Partition] = p.Oldest()
		} else {
			l.lagSeconds.WithLabelValues(label).Set(0)
		}
	}
	times, err := grouplag.RecordTimes(ctx, l.cl, l.topic, oldest)
	now := l.now()
	for p, ts := range times {
		l.lagSeconds.WithLabelValues(strconv.Itoa(int(p))).Set(max(0, now.Sub(ts).Seconds()))
	}
	return err
}
