package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// soakServices are the services whose memory and goroutines a soak
// samples (the broker is the test's kfake: it keeps every record in
// memory by design).
var soakServices = []string{"kafkagate", "persister", "dlt-reconciler"}

// procSample is one scrape of a service's admin /metrics.
type procSample struct {
	at      time.Duration // since the soak started
	service string
	// started is process_start_time_seconds: which life of the service
	// (a kill -9 and restart starts a new one).
	started    float64
	rss, heap  float64 // bytes: process_resident_memory_bytes, go_memstats_heap_inuse_bytes
	goroutines float64
}

// procSampler scrapes every service's /metrics at a fixed interval.
type procSampler struct {
	admin map[string]string
	start time.Time
	hc    *http.Client
	stop  chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	samples []procSample
	// misses are scrapes that failed: a service down during its fault.
	misses int
}

func startProcSampler(admin map[string]string, start time.Time, every time.Duration) *procSampler {
	ps := &procSampler{admin: admin, start: start, hc: &http.Client{Timeout: 5 * time.Second}, stop: make(chan struct{})}
	ps.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			ps.sampleAll()
			select {
			case <-ps.stop:
				return
			case <-tick.C:
			}
		}
	})
	return ps
}

func (ps *procSampler) halt() { close(ps.stop); ps.wg.Wait() }

func (ps *procSampler) sampleAll() {
	at := time.Since(ps.start)
	for _, name := range soakServices {
		smp, err := ps.scrape(name)
		ps.mu.Lock()
		if err != nil {
			ps.misses++
		} else {
			smp.at = at
			ps.samples = append(ps.samples, smp)
		}
		ps.mu.Unlock()
	}
}

func (ps *procSampler) scrape(name string) (procSample, error) {
	resp, err := ps.hc.Get("http://" + ps.admin[name] + "/metrics")
	if err != nil {
		return procSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return procSample{}, fmt.Errorf("%s /metrics: %s", name, resp.Status)
	}
	parser := expfmt.NewTextParser(promodel.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return procSample{}, err
	}
	gauge := func(metric string) (float64, error) {
		mf := families[metric]
		if mf == nil || len(mf.GetMetric()) == 0 {
			return 0, fmt.Errorf("%s exports no %s", name, metric)
		}
		return mf.GetMetric()[0].GetGauge().GetValue(), nil
	}
	smp := procSample{service: name}
	for _, g := range []struct {
		metric string
		into   *float64
	}{
		{"process_start_time_seconds", &smp.started},
		{"process_resident_memory_bytes", &smp.rss},
		{"go_memstats_heap_inuse_bytes", &smp.heap},
		{"go_goroutines", &smp.goroutines},
	} {
		if *g.into, err = gauge(g.metric); err != nil {
			return procSample{}, err
		}
	}
	return smp, nil
}

// snapshot returns the samples so far, in time order.
func (ps *procSampler) snapshot() ([]procSample, int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.samples), ps.misses
}

// flatQuantity is one sampled quantity the flatness check bounds: in a
// process's life, the median of its last third may exceed the median of
// its second third by at most rel of it plus abs. The first third is
// warm-up (pools, caches and connections filling). The bounds leave room
// for noise (heap in use swings with the GC cycle; RSS keeps the
// high-water mark of an outage's buffers; connections come and go), and a
// steady leak crosses them: TestFlatnessFindsGrowth shows 1 MiB or two
// goroutines per sample (every 15 s) over a 15-minute life caught.
type flatQuantity struct {
	name     string
	of       func(procSample) float64
	rel, abs float64
	unit     float64 // the table shows the value divided by unit
}

const mib = 1 << 20

var flatQuantities = []flatQuantity{
	{name: "RSS MiB", of: func(s procSample) float64 { return s.rss }, rel: 0.15, abs: 8 * mib, unit: mib},
	{name: "heap MiB", of: func(s procSample) float64 { return s.heap }, rel: 0.15, abs: 4 * mib, unit: mib},
	{name: "goroutines", of: func(s procSample) float64 { return s.goroutines }, rel: 0.10, abs: 10, unit: 1},
}

// minJudgedSamples is the fewest samples in a life that the flatness
// check judges (three per third).
const minJudgedSamples = 9

// flatVerdict is the flatness check of one service.
type flatVerdict struct {
	service string
	// from, to and samples are the life judged: the service's longest
	// (the one where a leak has the most time to show; a restart resets
	// memory, so samples across lives do not compare).
	from, to time.Duration
	samples  int
	lives    int
	judged   bool // the life had minJudgedSamples
	checks   []flatCheck
}

type flatCheck struct {
	q                  flatQuantity
	middle, last, most float64
}

func (c flatCheck) ok() bool { return c.last <= c.most }

func (v flatVerdict) flat() bool {
	for _, c := range v.checks {
		if !c.ok() {
			return false
		}
	}
	return v.judged
}

// judgeFlatness judges every service's longest life.
func judgeFlatness(samples []procSample) []flatVerdict {
	var out []flatVerdict
	for _, name := range soakServices {
		lives := map[float64][]procSample{}
		for _, s := range samples {
			if s.service == name {
				lives[s.started] = append(lives[s.started], s)
			}
		}
		v := flatVerdict{service: name, lives: len(lives)}
		var longest []procSample
		for _, life := range lives {
			if len(life) > len(longest) || (len(life) == len(longest) && len(life) > 0 && life[0].at < longest[0].at) {
				longest = life
			}
		}
		if len(longest) > 0 {
			v.from, v.to, v.samples = longest[0].at, longest[len(longest)-1].at, len(longest)
		}
		v.judged = len(longest) >= minJudgedSamples
		if v.judged {
			third := len(longest) / 3
			middle, last := longest[third:2*third], longest[len(longest)-third:]
			for _, q := range flatQuantities {
				c := flatCheck{q: q, middle: medianOf(middle, q.of), last: medianOf(last, q.of)}
				c.most = c.middle*(1+q.rel) + q.abs
				v.checks = append(v.checks, c)
			}
		}
		out = append(out, v)
	}
	return out
}

func medianOf(samples []procSample, of func(procSample) float64) float64 {
	vals := make([]float64, len(samples))
	for i, s := range samples {
		vals[i] = of(s)
	}
	slices.Sort(vals)
	n := len(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	return (vals[n/2-1] + vals[n/2]) / 2
}

// formatFlatness is the flatness verdicts as a Markdown table.
func formatFlatness(vs []flatVerdict) string {
	var b strings.Builder
	b.WriteString("| service | lives | life judged | samples |")
	for _, q := range flatQuantities {
		fmt.Fprintf(&b, " %s: 2nd third → last third (bound) |", q.name)
	}
	b.WriteString(" flat |\n| --- | ---: | --- | ---: |")
	for range flatQuantities {
		b.WriteString(" ---: |")
	}
	b.WriteString(" --- |\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %d | %s–%s | %d |", v.service, v.lives, minutes(v.from), minutes(v.to), v.samples)
		for _, c := range v.checks {
			fmt.Fprintf(&b, " %.1f → %.1f (≤ %.1f) |", c.middle/c.q.unit, c.last/c.q.unit, c.most/c.q.unit)
		}
		for range len(flatQuantities) - len(v.checks) {
			b.WriteString(" – |")
		}
		verdict := "yes"
		switch {
		case !v.judged:
			verdict = fmt.Sprintf("not judged (fewer than %d samples)", minJudgedSamples)
		case !v.flat():
			verdict = "**no: grows**"
		}
		fmt.Fprintf(&b, " %s |\n", verdict)
	}
	return b.String()
}

// formatSamples is a Markdown table of the samples nearest to each of the
// times at, per service: RSS, heap in use and goroutines.
func formatSamples(samples []procSample, at []time.Duration) string {
	var b strings.Builder
	b.WriteString("| at |")
	for _, name := range soakServices {
		fmt.Fprintf(&b, " %s RSS / heap MiB, goroutines |", name)
	}
	b.WriteString("\n| ---: |")
	for range soakServices {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	for _, t := range at {
		fmt.Fprintf(&b, "| %s |", minutes(t))
		for _, name := range soakServices {
			s, ok := nearest(samples, name, t)
			if !ok {
				b.WriteString(" – |")
				continue
			}
			fmt.Fprintf(&b, " %.0f / %.0f, %.0f |", s.rss/mib, s.heap/mib, s.goroutines)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func nearest(samples []procSample, service string, at time.Duration) (procSample, bool) {
	var best procSample
	found := false
	for _, s := range samples {
		if s.service == service && (!found || (s.at-at).Abs() < (best.at-at).Abs()) {
			best, found = s, true
		}
	}
	return best, found
}

// minutes formats d as m:ss.
func minutes(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// The flatness check passes noise and a restart's reset, and fails a
// steady growth of any quantity within a life.
func TestFlatnessFindsGrowth(t *testing.T) {
	t.Parallel()
	life := func(service string, started float64, from, n int, rss, heap, gr func(i int) float64) []procSample {
		var out []procSample
		for i := range n {
			out = append(out, procSample{at: time.Duration(from+i) * 15 * time.Second, service: service, started: started,
				rss: rss(i), heap: heap(i), goroutines: gr(i)})
		}
		return out
	}
	noisy := func(base float64) func(int) float64 {
		return func(i int) float64 { return base * (1 + 0.1*float64(i%3-1)) }
	}
	growing := func(base, step float64) func(int) float64 {
		return func(i int) float64 { return base + step*float64(i) }
	}
	var samples []procSample
	// kafkagate: a short first life with more memory, then a long flat one.
	samples = append(samples, life("kafkagate", 1, 0, 4, noisy(400*mib), noisy(200*mib), noisy(900))...)
	samples = append(samples, life("kafkagate", 2, 4, 60, noisy(60*mib), noisy(20*mib), noisy(90))...)
	// persister: the heap grows 1 MiB a sample.
	samples = append(samples, life("persister", 1, 0, 60, noisy(60*mib), growing(20*mib, mib), noisy(90))...)
	// dlt-reconciler: a goroutine leaks every sample; its life is too short
	// to judge on its own, the longest one is judged.
	samples = append(samples, life("dlt-reconciler", 1, 0, 5, noisy(40*mib), noisy(10*mib), noisy(40))...)
	samples = append(samples, life("dlt-reconciler", 2, 5, 55, noisy(40*mib), noisy(10*mib), growing(40, 2))...)

	vs := judgeFlatness(samples)
	require.Len(t, vs, 3)
	byName := map[string]flatVerdict{}
	for _, v := range vs {
		byName[v.service] = v
	}
	gate, pers, rec := byName["kafkagate"], byName["persister"], byName["dlt-reconciler"]
	require.True(t, gate.flat(), formatFlatness(vs))
	require.Equal(t, 2, gate.lives)
	require.Equal(t, 60, gate.samples, "the longest life is judged")
	require.False(t, pers.flat(), formatFlatness(vs))
	require.True(t, pers.checks[0].ok() && !pers.checks[1].ok() && pers.checks[2].ok(), "only the heap grew: %s", formatFlatness(vs))
	require.False(t, rec.flat(), formatFlatness(vs))
	require.False(t, rec.checks[2].ok(), "the goroutines grew")
	require.Contains(t, formatFlatness(vs), "**no: grows**")

	short := judgeFlatness(life("persister", 1, 0, minJudgedSamples-1, noisy(mib), noisy(mib), noisy(1)))
	require.False(t, short[1].judged, "fewer samples than minJudgedSamples are not judged")
	require.False(t, short[1].flat(), "an unjudged life is not called flat")
	require.Zero(t, short[0].samples, "a service without samples")
}
