package drainbench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Summary is the run's figures as medians over the rounds.
type Summary struct {
	// Variants are the drain figures, one value per variant (in
	// Result.Variants order).
	Variants []SummaryRow `json:"variants"`
	// Baselines are the same-run bounds, one value each.
	Baselines []SummaryRow `json:"baselines"`
}

// SummaryRow is one figure.
type SummaryRow struct {
	Figure string `json:"figure"`
	// Medians has one value per variant (one for a baseline); Rounds the
	// values it is the median of, per variant, in round order.
	Medians []float64   `json:"medians"`
	Rounds  [][]float64 `json:"rounds"`
	Command string      `json:"command"`
	format  string
}

// Median is the middle value (the mean of the middle two for an even
// count); NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figure extracts one value from a drain and its round's baselines; ok is
// false when the value does not exist (e.g. no naive baseline).
type figure struct {
	name, format, command string
	value                 func(d *DrainResult, b *Baselines, ref *DrainResult) (float64, bool)
}

func copyRate(b *Baselines, table string, conns int) (float64, bool) {
	if b == nil {
		return 0, false
	}
	for _, c := range b.Copy {
		if c.Table == table && c.Conns == conns {
			return c.RowsPerSec, c.RowsPerSec > 0
		}
	}
	return 0, false
}

func metric(d *DrainResult, name string) (float64, bool) {
	v, ok := d.Metrics[name]
	return v, ok
}

// sessionShare is the share of the sessions' samples whose state/wait key
// matches.
func sessionShare(match func(string) bool) func(*DrainResult, *Baselines, *DrainResult) (float64, bool) {
	return func(d *DrainResult, _ *Baselines, _ *DrainResult) (float64, bool) {
		var sum float64
		for k, v := range d.Activity {
			if match(k) {
				sum += v
			}
		}
		return sum, len(d.Activity) > 0
	}
}

func drainFigures(naiveCmd string) []figure {
	always := func(f func(d *DrainResult) float64) func(*DrainResult, *Baselines, *DrainResult) (float64, bool) {
		return func(d *DrainResult, _ *Baselines, _ *DrainResult) (float64, bool) { return f(d), true }
	}
	vsCopy := func(table string, conns int) func(*DrainResult, *Baselines, *DrainResult) (float64, bool) {
		return func(d *DrainResult, b *Baselines, _ *DrainResult) (float64, bool) {
			c, ok := copyRate(b, table, conns)
			return d.FinalRowsPerSec / c, ok
		}
	}
	return []figure{
		{"drain: events/s (cold start until Postgres holds every final row)", "int", "the variant's command (below)", always(func(d *DrainResult) float64 { return d.EventsPerSec })},
		{"drain: seconds", "f2", "", always(func(d *DrainResult) float64 { return d.Seconds })},
		{"drain: final rows/s (distinct keys ÷ seconds)", "int", "", always(func(d *DrainResult) float64 { return d.FinalRowsPerSec })},
		{"cold start: first offset commit, s after exec", "f2", "", always(func(d *DrainResult) float64 { return d.FirstCommitSeconds })},
		{"rows written per event ((n_tup_ins + n_tup_upd) ÷ events)", "f3", "pg_stat_user_tables, read_receipts partitions", always(func(d *DrainResult) float64 { return d.RowsPerEvent })},
		{"HOT updates (n_tup_hot_upd ÷ n_tup_upd)", "f3", "pg_stat_user_tables", always(func(d *DrainResult) float64 { return d.HOTRatio })},
		{"WAL bytes per event", "f0", "pg_current_wal_lsn() before and after", always(func(d *DrainResult) float64 { return d.WALBytesPerEvent })},
		{"CPU µs per event: persister", "f1", "/proc/<pid>/stat", always(func(d *DrainResult) float64 { return d.CPU.PersisterUsPerEvent })},
		{"CPU µs per event: Postgres (persister's sessions, background processes, postmaster)", "f1", "/proc/<pid>/stat of the postgres processes, by pg_stat_activity", always(func(d *DrainResult) float64 { return d.CPU.PostgresUsPerEvent })},
		{"CPU µs per event: devbroker", "f1", "/proc/<pid>/stat", always(func(d *DrainResult) float64 { return d.CPU.BrokerUsPerEvent })},
		{"CPU µs per event: persister + Postgres + devbroker", "f1", "", always(func(d *DrainResult) float64 {
			return d.CPU.PersisterUsPerEvent + d.CPU.PostgresUsPerEvent + d.CPU.BrokerUsPerEvent
		})},
		{"CPU µs per event: whole machine", "f1", "/proc/stat (busy, all CPUs)", always(func(d *DrainResult) float64 { return d.CPU.MachineUsPerEvent })},
		{"busy cores, whole machine (average over the drain)", "f2", "/proc/stat", always(func(d *DrainResult) float64 { return d.CPU.BusyCores })},
		{"busy cores: persister", "f2", "", always(func(d *DrainResult) float64 { return d.CPU.PersisterCores })},
		{"busy cores: Postgres", "f2", "", always(func(d *DrainResult) float64 { return d.CPU.PostgresCores })},
		{"persister's share of the drain spent writing batches", "pct", "receipts_persister_write_duration_seconds_sum ÷ drain", func(d *DrainResult, _ *Baselines, _ *DrainResult) (float64, bool) {
			return d.WriteShare, d.WriteShare > 0
		}},
		{"persister's Postgres sessions: executing (share of samples)", "pct", "pg_stat_activity every poll: state active, no wait event", sessionShare(func(k string) bool { return k == "active" })},
		{"… waiting on WAL (flush, write, insert locks)", "pct", "active / IO:WAL* or LWLock:WAL*", sessionShare(func(k string) bool {
			return strings.HasPrefix(k, "active / IO:WAL") || strings.HasPrefix(k, "active / LWLock:WAL")
		})},
		{"… idle in transaction (a client round trip inside a transaction)", "pct", "state idle in transaction", sessionShare(func(k string) bool { return strings.HasPrefix(k, "idle in transaction") })},
		{"… idle (no transaction: the persister is not writing)", "pct", "state idle", sessionShare(func(k string) bool { return k == "idle" || strings.HasPrefix(k, "idle / ") })},
		{"records per batch", "f0", "records_consumed_total ÷ batches_total", func(d *DrainResult, _ *Baselines, _ *DrainResult) (float64, bool) {
			c, ok1 := metric(d, "receipts_persister_records_consumed_total")
			n, ok2 := metric(d, "receipts_persister_batches_total")
			return c / n, ok1 && ok2 && n > 0
		}},
		{"ratio: drain events/s ÷ naive events/s", "f1", naiveCmd, func(d *DrainResult, b *Baselines, _ *DrainResult) (float64, bool) {
			if b == nil || b.Naive == nil {
				return 0, false
			}
			return d.EventsPerSec / b.Naive.EventsPerSec, true
		}},
		{"ratio: drain final rows/s ÷ COPY rows/s (read_receipts, 1 conn)", "f2", "same round", vsCopy("read_receipts", 1)},
		{"ratio: drain final rows/s ÷ COPY rows/s (read_receipts, 2 conns)", "f2", "same round", vsCopy("read_receipts", 2)},
		{"ratio: drain final rows/s ÷ COPY rows/s (plain table, 1 conn)", "f2", "same round", vsCopy(PlainTable, 1)},
		{"ratio: drain events/s ÷ variant A's (same round)", "f2", "", func(d *DrainResult, _ *Baselines, ref *DrainResult) (float64, bool) {
			if ref == nil || ref == d {
				return 0, false
			}
			return d.EventsPerSec / ref.EventsPerSec, true
		}},
		{"last offset commit, s after exec", "f2", "kadm FetchOffsets of the group", func(d *DrainResult, _ *Baselines, _ *DrainResult) (float64, bool) {
			return d.OffsetsDoneSeconds, d.OffsetsDoneSeconds > 0
		}},
		{"harness overhead: its process + its Postgres session, cores", "f3", "polls every --poll-interval", always(func(d *DrainResult) float64 {
			return (d.CPU.Harness + d.CPU.PostgresBreakdown[pgHarness]) / d.CPU.WallSeconds
		})},
		{"loading: produce records/s (not timed in the drain)", "int", "franz-go producer, defaults + 5 ms linger", always(func(d *DrainResult) float64 { return d.Produce.RecordsPerSec })},
	}
}

// Summarize computes the medians and same-run ratios of res.
func Summarize(res *Result) Summary {
	var s Summary
	baselineOf := map[int]*Baselines{}
	for _, b := range res.Baselines {
		baselineOf[b.Round] = b
	}
	ref := map[int]*DrainResult{}
	for _, d := range res.Drains {
		if len(res.Variants) > 0 && d.Variant == res.Variants[0].Name {
			ref[d.Round] = d
		}
	}
	naiveCmd := "naive: pgstore Upsert of one event per statement, autocommit"
	for _, f := range drainFigures(naiveCmd) {
		row := SummaryRow{Figure: f.name, Command: f.command, format: f.format}
		any := false
		for _, v := range res.Variants {
			var vals []float64
			for _, d := range res.Drains {
				if d.Variant != v.Name {
					continue
				}
				if x, ok := f.value(d, baselineOf[d.Round], ref[d.Round]); ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
					vals = append(vals, x)
				}
			}
			row.Rounds = append(row.Rounds, vals)
			m := Median(vals)
			if len(vals) > 0 {
				any = true
			} else {
				m = 0
			}
			row.Medians = append(row.Medians, m)
		}
		if any {
			s.Variants = append(s.Variants, row)
		}
	}
	baseline := func(name, format, command string, f func(b *Baselines) (float64, bool)) {
		var vals []float64
		for _, b := range res.Baselines {
			if x, ok := f(b); ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
				vals = append(vals, x)
			}
		}
		if len(vals) > 0 {
			s.Baselines = append(s.Baselines, SummaryRow{Figure: name, Medians: []float64{Median(vals)}, Rounds: [][]float64{vals}, Command: command, format: format})
		}
	}
	for _, table := range []string{"read_receipts", PlainTable} {
		for _, conns := range []int{1, 2} {
			what := "read_receipts (8 hash partitions, PK only since migration 0003, fillfactor 85)"
			if table == PlainTable {
				what = PlainTable + " (one table, PK only)"
			}
			baseline(fmt.Sprintf("COPY of the final rows, random order, into %s, %s: rows/s", what, plural(conns, "conn")), "int",
				fmt.Sprintf("TRUNCATE; CHECKPOINT; COPY %s (10 columns) FROM STDIN (binary) ×%d", table, conns),
				func(b *Baselines) (float64, bool) { return copyRate(b, table, conns) })
		}
	}
	baseline("COPY rows/s: read_receipts ÷ plain table (1 conn)", "f2", "same round", func(b *Baselines) (float64, bool) {
		a, ok1 := copyRate(b, "read_receipts", 1)
		p, ok2 := copyRate(b, PlainTable, 1)
		return a / p, ok1 && ok2
	})
	if len(res.Baselines) > 0 && res.Baselines[0].Naive != nil {
		n := res.Baselines[0].Naive
		baseline(fmt.Sprintf("naive upserts: events/s (first %d events, %d conns)", n.Events, n.Conns), "int",
			"TRUNCATE; CHECKPOINT; "+naiveCmd+fmt.Sprintf(", %d conns, events routed by key", n.Conns),
			func(b *Baselines) (float64, bool) {
				if b.Naive == nil {
					return 0, false
				}
				return b.Naive.EventsPerSec, true
			})
	}
	return s
}

// Markdown is the run's summary as markdown.
func Markdown(res *Result) string {
	var w strings.Builder
	fmt.Fprintf(&w, "# Persister drain: %s events, %s\n\n", thousands(float64(res.Dataset.Events)), res.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&w, "- command: `%s` (harness commit %s)\n", res.CommandLine, orDash(res.Machine.Commit))
	dc := res.Config.Data
	fmt.Fprintf(&w, "- data set: %s READ events, seed %d, %s users × %d channels, zipf s = %g, dup %g, late %g → **%s distinct keys**, %s advancing events (%.3f per event), hottest key %s events, top 1 %% of keys %.0f %% of events, %.0f-byte values\n",
		thousands(float64(res.Dataset.Events)), dc.Seed, thousands(float64(dc.Users)), dc.Channels, dc.Zipf, dc.Dup, dc.Late,
		thousands(float64(res.Dataset.DistinctKeys)), thousands(float64(res.Dataset.Advancing)),
		float64(res.Dataset.Advancing)/float64(max(1, res.Dataset.Events)), thousands(float64(res.Dataset.HottestKeyEvents)),
		100*res.Dataset.Top1PctKeysShare, res.Dataset.MeanValueBytes)
	m := res.Machine
	fmt.Fprintf(&w, "- machine: %d CPUs (%s), %.1f GiB, %s, kernel %s, %s; Postgres %s (shared_buffers %s, synchronous_commit %s, autovacuum %s); Redis %s\n",
		m.NumCPU, m.CPUModel, m.MemoryGiB, m.OS, m.Kernel, m.Go, m.Postgres.Version,
		m.Postgres.Settings["shared_buffers"], m.Postgres.Settings["synchronous_commit"], m.Postgres.Settings["autovacuum"], orDash(m.Redis))
	fmt.Fprintf(&w, "- load average at start %s, at end %s; %d rounds, %d partitions, variants interleaved (order rotated each round)\n",
		m.LoadAvgStart, m.LoadAvgEnd, res.Config.Runs, res.Config.Partitions)
	for _, v := range res.Variants {
		fmt.Fprintf(&w, "- variant `%s` (build %s)\n", v.Label(), orDash(v.Build))
	}
	w.WriteString("\nMedians over the rounds; each round's value in parentheses, in round order. Ratios are per round (same-run), then the median.\n\n")

	w.WriteString("| figure |")
	for _, v := range res.Variants {
		fmt.Fprintf(&w, " %s |", v.Label())
	}
	w.WriteString(" command |\n| --- |")
	for range res.Variants {
		w.WriteString(" ---: |")
	}
	w.WriteString(" --- |\n")
	for _, r := range res.Summary.Variants {
		fmt.Fprintf(&w, "| %s |", r.Figure)
		for i := range r.Medians {
			fmt.Fprintf(&w, " %s |", cell(r, i))
		}
		fmt.Fprintf(&w, " %s |\n", r.Command)
	}
	if len(res.Summary.Baselines) > 0 {
		w.WriteString("\n| same-run baseline | median | command |\n| --- | ---: | --- |\n")
		for _, r := range res.Summary.Baselines {
			fmt.Fprintf(&w, "| %s | %s | %s |\n", r.Figure, cell(r, 0), r.Command)
		}
	}
	w.WriteString("\nCommands of round 1:\n\n")
	seen := map[string]bool{}
	for _, d := range res.Drains {
		if d.Round == 1 && !seen[d.Variant] {
			seen[d.Variant] = true
			fmt.Fprintf(&w, "- %s: `%s`\n", d.Variant, strings.Join(d.Command, " "))
		}
	}
	if d := res.ProfileDrain; d != nil {
		fmt.Fprintf(&w, "\nProfile drain (not in the medians): %s events/s; `go tool pprof -top %s %s`\n",
			thousands(d.EventsPerSec), d.Command[0], d.Profile)
	}
	if len(res.Failures) > 0 {
		w.WriteString("\n**FAILED**:\n\n")
		for _, f := range res.Failures {
			fmt.Fprintf(&w, "- %s\n", f)
		}
	} else if len(res.Drains) > 0 {
		fmt.Fprintf(&w, "\nEvery drain's table equalled the greatest value per key (%s rows checked per drain).\n", thousands(float64(res.Dataset.DistinctKeys)))
	}
	fmt.Fprintf(&w, "\nRaw: %s/result.json\n", res.Dir)
	return w.String()
}

func cell(r SummaryRow, i int) string {
	if i >= len(r.Rounds) || len(r.Rounds[i]) == 0 {
		return "—"
	}
	s := "**" + format(r.format, r.Medians[i]) + "**"
	if len(r.Rounds[i]) > 1 {
		parts := make([]string, len(r.Rounds[i]))
		for j, x := range r.Rounds[i] {
			parts[j] = format(r.format, x)
		}
		s += " (" + strings.Join(parts, " / ") + ")"
	}
	return s
}

func format(f string, x float64) string {
	switch f {
	case "int":
		return thousands(x)
	case "f0":
		return strconv.FormatFloat(x, 'f', 0, 64)
	case "f1":
		return strconv.FormatFloat(x, 'f', 1, 64)
	case "f2":
		return strconv.FormatFloat(x, 'f', 2, 64)
	case "f3":
		return strconv.FormatFloat(x, 'f', 3, 64)
	case "pct":
		return strconv.FormatFloat(100*x, 'f', 0, 64) + " %"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// thousands formats a rounded number with comma separators.
func thousands(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
