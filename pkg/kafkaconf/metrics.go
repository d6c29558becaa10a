package kafkaconf

import (
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gaugeSuffixFixer registers kprom's collectors on reg, renaming the gauges
// kprom names *_total (buffered_produce_records_total and
// buffered_fetch_records_total, which count what is buffered now) to drop
// the suffix: by the Prometheus convention, which `promtool check metrics`
// enforces and our dashboards rely on, _total names a counter.
type gaugeSuffixFixer struct{ prometheus.Registerer }

var fqNameInDesc = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register wraps a single-metric gauge collector named *_total; everything
// else is registered as it is.
func (f gaugeSuffixFixer) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc, 16)
	c.Describe(descs)
	close(descs)
	var all []*prometheus.Desc
	for d := range descs {
		all = append(all, d)
	}
	if len(all) == 1 {
		if m := fqNameInDesc.FindStringSubmatch(all[0].String()); m != nil && strings.HasSuffix(m[1], "_total") && isGauge(c) {
			c = &renamedGauge{inner: c, name: strings.TrimSuffix(m[1], "_total")}
		}
	}
	return f.Registerer.Register(c)
}

// MustRegister is Register, panicking on error as promauto expects.
func (f gaugeSuffixFixer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := f.Register(c); err != nil {
			panic(err)
		}
	}
}

func isGauge(c prometheus.Collector) bool {
	ms := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ms); close(ms) }()
	gauge := false
	for m := range ms {
		var d dto.Metric
		if m.Write(&d) == nil && d.Gauge != nil {
			gauge = true
		}
	}
	return gauge
}

// renamedGauge re-exports a gauge under another name. It is unchecked (it
// describes nothing): its one series is built at each scrape.
type renamedGauge struct {
	inner prometheus.Collector
	name  string
}

func (*renamedGauge) Describe(chan<- *prometheus.Desc) {}

func (r *renamedGauge) Collect(ch chan<- prometheus.Metric) {
	ms := make(chan prometheus.Metric, 16)
	go func() { r.inner.Collect(ms); close(ms) }()
	for m := range ms {
		var d dto.Metric
		if m.Write(&d) != nil || d.Gauge == nil {
			continue
		}
		labels := prometheus.Labels{}
		for _, l := range d.Label {
			labels[l.GetName()] = l.GetValue()
		}
		desc := prometheus.NewDesc(r.name, "Records buffered in the client now (kprom's "+r.name+"_total, renamed: a gauge).", nil, labels)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, d.Gauge.GetValue())
	}
}
