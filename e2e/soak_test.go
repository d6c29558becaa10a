package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// soakConfig is how long a soak runs, how often it injects a fault and
// how often it samples the services (SOAK_DURATION, SOAK_FAULT_EVERY,
// SOAK_SAMPLE_EVERY). The defaults are the short run of make faults;
// make soak runs 30 minutes.
type soakConfig struct {
	duration, faultEvery, sampleEvery time.Duration
}

var soakShort = soakConfig{duration: 90 * time.Second, faultEvery: 14 * time.Second, sampleEvery: 5 * time.Second}

// soakJudgeFlatFrom is the shortest soak whose flatness is required: in a
// shorter one every process life is mostly warm-up (its verdict is still
// computed and reported).
const soakJudgeFlatFrom = 10 * time.Minute

// soakLoad is the soak's mixed load, paced: the history checker holds
// every acknowledged write of the whole run against the topic, so its
// size is bounded by the rate (a few hundred writes a second over 30
// minutes), and the keys are spread so that no key's records grow long.
var soakLoad = loadShape{
	w: workload{clients: 4, users: 300, channels: 10, batch: 20, dup: 0.2, reorder: 0.15,
		private: 0.1, epoch: 0.2, retry: true, pause: 200 * time.Millisecond},
	notices: noticeLoad{channels: 20, users: 40, clients: 2, pause: 250 * time.Millisecond},
}

func soakConfigFromEnv() (soakConfig, error) {
	c := soakShort
	var errs []string
	for _, f := range []struct {
		env      string
		into     *time.Duration
		min, max time.Duration
	}{
		{"SOAK_DURATION", &c.duration, time.Minute, 24 * time.Hour},
		{"SOAK_FAULT_EVERY", &c.faultEvery, 10 * time.Second, time.Hour},
		{"SOAK_SAMPLE_EVERY", &c.sampleEvery, time.Second, 5 * time.Minute},
	} {
		v := os.Getenv(f.env)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < f.min || d > f.max {
			errs = append(errs, fmt.Sprintf("%s=%q: want a duration from %s to %s", f.env, v, f.min, f.max))
			continue
		}
		*f.into = d
	}
	if c.faultEvery >= c.duration {
		errs = append(errs, fmt.Sprintf("SOAK_FAULT_EVERY (%s) must be shorter than SOAK_DURATION (%s)", c.faultEvery, c.duration))
	}
	if c.sampleEvery > c.faultEvery {
		errs = append(errs, fmt.Sprintf("SOAK_SAMPLE_EVERY (%s) must not be longer than SOAK_FAULT_EVERY (%s)", c.sampleEvery, c.faultEvery))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("soak: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// soakFault is one fault of the soak's cycle; outage is how long a
// stopped server stays down.
type soakFault struct {
	name      string
	redisLoss bool
	inject    func(t *testing.T, s *stack, outage time.Duration)
}

// soakFaults are the soak's cycle, in order: each service killed, the
// broker stopped and started, Redis and Postgres restarted.
func soakFaults() []soakFault {
	kill := func(pick func(s *stack) *proc) func(*testing.T, *stack, time.Duration) {
		return func(t *testing.T, s *stack, _ time.Duration) { killAndRestart(t, s, pick(s)) }
	}
	return []soakFault{
		{name: "kill -9 kafkagate", inject: kill(func(s *stack) *proc { return s.gate })},
		{name: "kill -9 persister", inject: kill(func(s *stack) *proc { return s.persister })},
		{name: "kill -9 dlt-reconciler", inject: kill(func(s *stack) *proc { return s.reconciler })},
		{name: "stop broker, start on its data dir", inject: bounceBroker},
		{name: "restart Redis (empty)", redisLoss: true, inject: bounceRedis},
		{name: "restart Postgres", inject: func(t *testing.T, s *stack, _ time.Duration) { s.pgServer.Restart(t) }},
	}
}

// soakFaultRun is one injected fault: when, which, how long it took, and
// how many marks were acknowledged since the one before.
type soakFaultRun struct {
	at, took   time.Duration
	name       string
	ackedSince int
}

// TestSoak keeps the mixed load of the fault suite on one stack while it
// cycles through the faults, then holds the run to the fault suite's
// checks and the services' memory and goroutines to the flatness check.
// make faults runs it short (soakShort); make soak for 30 minutes. Its
// report goes to .run/ and the log.
func TestSoak(t *testing.T) {
	t.Parallel() // beside the fault scenarios (TestFaults), in one of -parallel's slots
	cfg, err := soakConfigFromEnv()
	require.NoError(t, err)
	outage := min(20*time.Second, cfg.faultEvery/4)
	t.Logf("soak: %s, a fault every %s (outages %s), samples every %s", cfg.duration, cfg.faultEvery, outage, cfg.sampleEvery)

	// The sweep is on (a Redis restart loses the real-time view of keys
	// nobody reads; the sweep restores it). Its grace outlasts the broker's
	// outage: keys that the spool holds are in flight, not drift, and a
	// repair of Postgres from Redis still fails the run.
	s := newStack(t, stackOptions{spool: true, ownServers: true, extraReconcilerArgs: []string{"--sweep-grace", "60s"}})
	start := time.Now()
	l := startLoad(t, s, soakLoad, false)
	ps := startProcSampler(s.admin, start, cfg.sampleEvery)
	var runs []soakFaultRun
	faults := soakFaults()
	ackedBefore := 0
	for i := 1; time.Duration(i)*cfg.faultEvery < cfg.duration; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * cfg.faultEvery))) // the schedule, not synchronisation
		for _, p := range []*proc{s.gate, s.persister, s.reconciler, s.broker} {
			require.True(t, p.running(), "%s exited by itself:\n%s", p.name, p.tail(40))
		}
		f := faults[(i-1)%len(faults)]
		acked := ackedCount(l.m)
		run := soakFaultRun{at: time.Since(start), name: f.name, ackedSince: acked - ackedBefore}
		ackedBefore = acked
		if f.redisLoss {
			l.redisLost()
		}
		f.inject(t, s, outage)
		if f.redisLoss {
			l.redisLost()
		}
		run.took = time.Since(start) - run.at
		runs = append(runs, run)
		t.Logf("%s %s (%s); %d marks acknowledged since the last fault", minutes(run.at), f.name, run.took.Round(100*time.Millisecond), run.ackedSince)
		require.Positive(t, run.ackedSince, "no mark acknowledged between faults: the load stalled")
	}
	time.Sleep(time.Until(start.Add(cfg.duration))) // the schedule, not synchronisation
	ps.halt()
	samples, misses := ps.snapshot()
	r := l.finish(t, s, fmt.Sprintf("soak %s, %d faults", cfg.duration, len(runs)), true, false)
	flat := judgeFlatness(samples)

	report := soakReport(t, cfg, runs, r, flat, samples, misses)
	path := writeSoakReport(t, report)
	t.Logf("soak report: %s\n%s", path, soakSummary(cfg, r, flat, samples))

	requireNoLoss(t, r, 0)
	for _, v := range flat {
		require.Positive(t, v.samples, "%s: no sample of its memory and goroutines", v.service)
	}
	if cfg.duration < soakJudgeFlatFrom {
		t.Logf("flatness reported, not required: a run shorter than %s is mostly warm-up", soakJudgeFlatFrom)
		return
	}
	for _, v := range flat {
		require.True(t, v.judged, "%s: its longest life had %d samples, fewer than %d", v.service, v.samples, minJudgedSamples)
		require.True(t, v.flat(), "%s: memory or goroutines grew over its life:\n%s", v.service, formatFlatness(flat))
	}
}

func ackedCount(m *model) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// soakMarks are the times the compact table shows: six over the run.
func soakMarks(d time.Duration) []time.Duration {
	var at []time.Duration
	for i := 1; i <= 6; i++ {
		at = append(at, d*time.Duration(i)/6)
	}
	return at
}

// soakSummary is the verdict and the compact tables.
func soakSummary(cfg soakConfig, r result, flat []flatVerdict, samples []procSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict: lost %d, regressed %d (sampler) / %d (API reads), not on the topic %d, behind in Postgres %d, count mismatches %d, dead letters %d, sweep repairs into Postgres %d\n",
		r.lost, r.regressed, r.hist.regressed, r.hist.missing, r.hist.lost, r.countMismatches, r.deadLetters, r.sweptIntoPG)
	fmt.Fprintf(&b, "load: %d marks acknowledged, %d writes in the history (%d KAFKA / %d SPOOLED), %d API reads, %d notices, %d failed calls retried\n\n",
		r.acked, r.hist.writes, r.kafka, r.spooledAll, r.hist.reads, r.notices, r.callErrs)
	b.WriteString(formatSamples(samples, soakMarks(cfg.duration)))
	b.WriteString("\n")
	b.WriteString(formatFlatness(flat))
	return b.String()
}

// soakReport is the whole report: the run, its faults, the verdicts and
// every sample.
func soakReport(t *testing.T, cfg soakConfig, runs []soakFaultRun, r result, flat []flatVerdict, samples []procSample, misses int) string {
	var b strings.Builder
	race := "without"
	if v := os.Getenv(raceEnv); v != "" && v != "0" {
		race = "with"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Soak\n\nRun at %s on commit `%s` (%s, %s/%s, %d CPUs, host %s; binaries built %s -race): %s, a fault every %s, samples every %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), gitOut(t, "rev-parse", "--short=12", "HEAD"), runtime.Version(), runtime.GOOS,
		runtime.GOARCH, runtime.NumCPU(), host, race, cfg.duration, cfg.faultEvery, cfg.sampleEvery)
	b.WriteString("## Verdict\n\n")
	b.WriteString(soakSummary(cfg, r, flat, samples))
	b.WriteString("\n" + formatTable([]result{r}))
	b.WriteString("\n## Faults\n\n| at | fault | took | marks acknowledged since the last fault |\n| ---: | --- | ---: | ---: |\n")
	for _, f := range runs {
		fmt.Fprintf(&b, "| %s | %s | %.1f s | %d |\n", minutes(f.at), f.name, f.took.Seconds(), f.ackedSince)
	}
	fmt.Fprintf(&b, "\n## Samples\n\n%d scrapes failed (a service down during its fault).\n\n| at | service | process started | RSS MiB | heap in use MiB | goroutines |\n| ---: | --- | --- | ---: | ---: | ---: |\n", misses)
	for _, s := range samples {
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %.1f | %.0f |\n", minutes(s.at), s.service,
			time.Unix(int64(s.started), 0).UTC().Format("15:04:05"), s.rss/mib, s.heap/mib, s.goroutines)
	}
	return b.String()
}

// writeSoakReport writes the report to .run/soak-<time>.md at the top of
// the tree and returns its path.
func writeSoakReport(t *testing.T, report string) string {
	t.Helper()
	dir := filepath.Join("..", ".run")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "soak-"+time.Now().UTC().Format("20060102-150405")+".md")
	require.NoError(t, os.WriteFile(path, []byte(report), 0o644))
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	return abs
}
