package kafkaconf_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
)

// kprom names two gauges *_total; the client's metrics come out with the
// suffix dropped, and every other name as kprom made it.
func TestClientMetricsNameNoGaugeTotal(t *testing.T) {
	t.Parallel()
	b := kafkatest.New(t)
	reg := prometheus.NewRegistry()
	cl, err := kgo.NewClient(kafkaconf.Config{Brokers: b.Seeds}.Opts(nil, reg, "testsub_kafka")...)
	require.NoError(t, err)
	defer cl.Close()

	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]dto.MetricType{}
	for _, mf := range mfs {
		names[mf.GetName()] = mf.GetType()
		if mf.GetType() == dto.MetricType_GAUGE {
			require.False(t, strings.HasSuffix(mf.GetName(), "_total"), "gauge %s", mf.GetName())
		}
	}
	require.Equal(t, dto.MetricType_GAUGE, names["receipts_testsub_kafka_buffered_fetch_records"], "%v", names)
	require.Equal(t, dto.MetricType_GAUGE, names["receipts_testsub_kafka_buffered_produce_records"])
	require.Equal(t, dto.MetricType_GAUGE, names["receipts_testsub_kafka_buffered_fetch_bytes"], "untouched")
}
