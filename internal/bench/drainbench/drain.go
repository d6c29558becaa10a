package drainbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/internal/bench/benchpg"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// DrainResult is one cold-start drain of the whole data set by one
// persister variant.
type DrainResult struct {
	Round   int      `json:"round"`
	Variant string   `json:"variant"`
	Command []string `json:"command"`
	// LoadAvg is /proc/loadavg when the persister started.
	LoadAvg string        `json:"loadavg_at_start"`
	Produce ProduceResult `json:"produce"`

	// Seconds runs from the persister's exec until Postgres was seen
	// holding every final row (resolution: the poll interval).
	Seconds         float64 `json:"seconds"`
	EventsPerSec    float64 `json:"events_per_sec"`
	FinalRowsPerSec float64 `json:"final_rows_per_sec"`
	// FirstCommitSeconds is when the group first committed an offset (the
	// cold start: exec, connecting, joining the group, the first batch).
	FirstCommitSeconds float64 `json:"first_commit_seconds"`
	// OffsetsDoneSeconds is when every partition's committed offset reached
	// its end (after Seconds: the last commit follows the last write).
	OffsetsDoneSeconds float64 `json:"offsets_done_seconds"`
	// SentinelsSeconds is when every partition's last-written key was
	// final; from then on each poll counted the whole table (FullPolls).
	SentinelsSeconds float64 `json:"sentinels_seconds"`
	FullPolls        int     `json:"full_polls"`

	CPU CPUResult `json:"cpu"`

	// Table are the statistics counters of read_receipts (all partitions)
	// over the drain; RowsPerEvent = (inserted + updated) / events.
	Table        benchpg.TableStats `json:"table"`
	RowsPerEvent float64            `json:"rows_written_per_event"`
	// HOTRatio = n_tup_hot_upd / n_tup_upd.
	HOTRatio         float64 `json:"hot_ratio"`
	WALBytes         int64   `json:"wal_bytes"`
	WALBytesPerEvent float64 `json:"wal_bytes_per_event"`
	// WALFPI and WALRecords are from pg_stat_wal (the whole server, so
	// anything else writing to it is included).
	WALFPI     int64 `json:"wal_fpi"`
	WALRecords int64 `json:"wal_records"`

	// Activity is the share of samples of the persister's Postgres sessions
	// (every poll) by state and wait event: what the sessions were doing.
	Activity        map[string]float64 `json:"pg_activity_share"`
	ActivitySamples int                `json:"pg_activity_samples"`

	// Metrics are the persister's own counters at the end (receipts_*,
	// process_cpu_seconds_total, go_gc_*), summed over labels.
	Metrics map[string]float64 `json:"persister_metrics"`
	// WriteShare is receipts_persister_write_duration_seconds_sum ÷
	// Seconds: the share of the drain the persister spent writing batches
	// (the rest is polling, decoding, deduping and committing, serially).
	WriteShare float64 `json:"write_share,omitempty"`

	Verify VerifyResult `json:"verify"`
	// Exit is how the persister ended after SIGTERM ("" when cleanly).
	Exit string `json:"persister_exit,omitempty"`
	// Profile is the CPU profile's path when one was taken.
	Profile string `json:"profile,omitempty"`
}

// CPUResult is the CPU used over a drain, from /proc, in seconds.
type CPUResult struct {
	// WallSeconds is the interval between the two CPU snapshots (the
	// drain, plus the last poll).
	WallSeconds float64 `json:"wall_seconds"`
	// Persister is the persister process' whole life up to the end.
	Persister float64 `json:"persister"`
	Broker    float64 `json:"devbroker"`
	// Postgres is what the drain cost Postgres (pgDrainCategories: the
	// persister's sessions, the background processes, the postmaster);
	// PostgresAll is every postgres process, the harness' own session and
	// other users' sessions included. PostgresBreakdown splits it.
	Postgres          float64            `json:"postgres"`
	PostgresAll       float64            `json:"postgres_all"`
	PostgresBreakdown map[string]float64 `json:"postgres_breakdown"`
	// Harness is this process (polling, kafka admin requests).
	Harness float64 `json:"harness"`
	// Machine is every CPU's busy time (/proc/stat); Steal is time the
	// hypervisor gave to other guests.
	Machine float64 `json:"machine"`
	Steal   float64 `json:"steal"`

	// Per event, in µs.
	PersisterUsPerEvent float64 `json:"persister_us_per_event"`
	PostgresUsPerEvent  float64 `json:"postgres_us_per_event"`
	BrokerUsPerEvent    float64 `json:"devbroker_us_per_event"`
	MachineUsPerEvent   float64 `json:"machine_us_per_event"`
	// BusyCores is Machine ÷ WallSeconds; the others likewise.
	BusyCores      float64 `json:"busy_cores"`
	PersisterCores float64 `json:"persister_cores"`
	PostgresCores  float64 `json:"postgres_cores"`
}

// Postgres CPU categories.
const (
	pgPersister   = "persister sessions"
	pgBackground  = "background processes"
	pgPostmaster  = "postmaster"
	pgEnded       = "sessions ended during the drain"
	pgUnknown     = "other postgres processes"
	pgHarness     = "harness session"
	pgOtherClient = "other databases' sessions"
)

// cpuSnapshot is every process the drain accounts, at one moment.
type cpuSnapshot struct {
	at       time.Time
	machine  MachineStat
	postgres map[int]ProcStat
	broker   ProcStat
	self     ProcStat
}

func takeSnapshot(brokerPID int) (cpuSnapshot, error) {
	s := cpuSnapshot{at: time.Now()}
	var err error
	if s.machine, err = ReadMachineStat(); err != nil {
		return s, err
	}
	if s.postgres, err = ProcsByComm("postgres"); err != nil {
		return s, err
	}
	if s.broker, err = ReadProcStat(brokerPID); err != nil {
		return s, fmt.Errorf("reading the broker's CPU: %w", err)
	}
	if s.self, err = ReadProcStat(os.Getpid()); err != nil {
		return s, err
	}
	return s, nil
}

// sentinel is a key whose final row is written by the last advancing
// event of its Kafka partition: once every partition's sentinel is final,
// the drain is nearly done and the full check starts.
type sentinel struct {
	user, channel string
	seq           int64
}

func sentinels(finals []Final, parts []int32) []sentinel {
	best := map[int32]Final{}
	for _, f := range finals {
		p := parts[f.LastAdvance]
		if b, ok := best[p]; !ok || f.LastAdvance > b.LastAdvance {
			best[p] = f
		}
	}
	out := make([]sentinel, 0, len(best))
	for _, f := range best {
		out = append(out, sentinel{f.State.Key.User, f.State.Key.Channel, f.State.Read.Position.Seq})
	}
	return out
}

// drain runs one variant's cold-start drain; dir receives its logs.
func (h *harness) drain(ctx context.Context, round int, v Variant, dir string, profileSeconds int) (*DrainResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res := &DrainResult{Round: round, Variant: v.Name}
	if err := h.pg.Recreate(ctx); err != nil {
		return nil, err
	}
	if err := runChild(ctx, "persister migrate", filepath.Join(dir, "migrate.log"), 2*time.Minute,
		v.Bin, "migrate", "--pg-url", h.pg.URL()); err != nil {
		return nil, err
	}
	prefillSum, err := h.prefill(ctx, h.cfg.PrefillRows)
	if err != nil {
		return nil, fmt.Errorf("prefilling %d rows: %w", h.cfg.PrefillRows, err)
	}
	dataDir, err := os.MkdirTemp("", "drainbench-kafka-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	br, err := startBroker(ctx, h.cfg.DevbrokerBin, dataDir, filepath.Join(dir, "devbroker.log"), event.TopicDefault, h.cfg.Partitions)
	if err != nil {
		return nil, err
	}
	defer func() { _ = br.stop() }() // a stop error after the drain changes no figure
	h.logf("  %s: producing %d records", v.Name, len(h.ds.Events))
	prod, parts, err := br.produce(ctx, h.ds, event.TopicDefault)
	if err != nil {
		return nil, err
	}
	res.Produce = prod
	sents := sentinels(h.finals, parts)

	conn, err := h.pg.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var myPID int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&myPID); err != nil {
		return nil, err
	}
	// Every variant starts from the same state: the produce's dirty pages
	// and anything before flushed, so no checkpoint is owed to earlier work.
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	lsn0, err := benchpg.WALLSN(ctx, conn)
	if err != nil {
		return nil, err
	}
	wal0, err := benchpg.ReadWALStats(ctx, conn)
	if err != nil {
		return nil, err
	}
	table0, err := benchpg.ReadTableStats(ctx, conn, "read_receipts")
	if err != nil {
		return nil, err
	}

	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	adminAddr := "127.0.0.1:" + strconv.Itoa(adminPort)
	args := append([]string{"--brokers", br.addr, "--pg-url", h.pg.URL(), "--admin-addr", adminAddr}, v.Args...)
	res.Command = append([]string{v.Bin}, args...)
	res.LoadAvg = LoadAvg()
	before, err := takeSnapshot(br.pid())
	if err != nil {
		return nil, err
	}
	h.logf("  %s: draining (%s)", v.Name, res.LoadAvg)
	per, err := startChild("persister", filepath.Join(dir, "persister.log"), v.Bin, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = per.stop(30 * time.Second) }() // stopped explicitly below; this covers early returns
	t0 := per.started

	// Poll until Postgres holds every final row.
	wantRows, wantSum := int64(len(h.finals)+h.cfg.PrefillRows), h.stats.SumReadSeq+prefillSum
	ends := prod.EndOffsets
	var (
		firstCommit, offsetsDone time.Time
		activitySamples          int
		activityCounts           = map[string]int{}
		profileDone              chan error
		profilePath              = filepath.Join(dir, "persister.cpu.pprof")
		end                      time.Time
		after                    cpuSnapshot
		persisterStat            ProcStat
		backends                 map[int]benchpg.Backend
	)
	checkOffsets := func(now time.Time) {
		if !offsetsDone.IsZero() {
			return
		}
		got, err := br.committed(ctx, h.cfg.Group, event.TopicDefault)
		if err != nil {
			return
		}
		done := true
		for p, e := range ends {
			if e > 0 && got[p] < e {
				done = false
			}
			if got[p] > 0 && firstCommit.IsZero() {
				firstCommit = now
			}
		}
		if done {
			offsetsDone = now
		}
	}
	tick := time.NewTicker(h.cfg.PollInterval)
	defer tick.Stop()
	deadline := t0.Add(h.cfg.DrainTimeout)
	for end.IsZero() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		if done, err := per.exited(); done {
			return nil, fmt.Errorf("the persister exited during the drain: %v (log %s)", err, per.logPath)
		}
		if done, _ := br.exited(); done {
			return nil, errBrokerGone
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("the drain did not finish within %s (--drain-timeout); log %s", h.cfg.DrainTimeout, per.logPath)
		}
		if firstCommit.IsZero() {
			// The cold start; afterwards the offsets are only read once
			// the drain is over (keeping the harness' own load low).
			checkOffsets(now)
		}
		if profileSeconds > 0 && profileDone == nil && !firstCommit.IsZero() {
			profileDone = make(chan error, 1)
			go func() { profileDone <- fetchProfile(ctx, adminAddr, profileSeconds, profilePath) }()
		}
		var complete bool
		if len(sents) == 0 {
			res.FullPolls++
		}
		sents, complete, err = h.pollPostgres(ctx, conn, sents, wantRows, wantSum, activityCounts)
		if err != nil {
			return nil, err
		}
		if len(sents) == 0 && res.SentinelsSeconds == 0 {
			res.SentinelsSeconds = time.Since(t0).Seconds()
		}
		activitySamples++
		if complete {
			// The table was complete when the poll's snapshot was taken,
			// at its start; the CPU is read at once, before anything else.
			end = now
			persisterStat, err = ReadProcStat(per.pid())
			if err != nil {
				return nil, err
			}
			if after, err = takeSnapshot(br.pid()); err != nil {
				return nil, err
			}
			if backends, err = benchpg.Activity(ctx, conn); err != nil {
				return nil, err
			}
		}
	}
	lsn1, err := benchpg.WALLSN(ctx, conn)
	if err != nil {
		return nil, err
	}
	res.Seconds = end.Sub(t0).Seconds()
	events := float64(len(h.ds.Events))
	res.EventsPerSec = events / res.Seconds
	res.FinalRowsPerSec = float64(wantRows) / res.Seconds
	if !firstCommit.IsZero() {
		res.FirstCommitSeconds = firstCommit.Sub(t0).Seconds()
	}
	res.WALBytes = int64(lsn1 - lsn0)
	res.WALBytesPerEvent = float64(res.WALBytes) / events
	res.CPU = h.cpu(before, after, persisterStat, backends, myPID, after.at.Sub(before.at).Seconds(), events)
	res.ActivitySamples = activitySamples
	res.Activity = map[string]float64{}
	var sessionSamples int
	for _, n := range activityCounts {
		sessionSamples += n
	}
	for k, n := range activityCounts {
		res.Activity[k] = float64(n) / float64(sessionSamples)
	}

	// The last commit follows the last write; wait for it (bounded), so
	// that the persister stops with nothing in hand.
	_ = poll(ctx, h.cfg.PollInterval, 30*time.Second, "waiting for the last offset commit", func() (bool, error) {
		checkOffsets(time.Now())
		return !offsetsDone.IsZero(), nil
	})
	if !offsetsDone.IsZero() {
		res.OffsetsDoneSeconds = offsetsDone.Sub(t0).Seconds()
	}
	if profileDone != nil {
		if err := <-profileDone; err != nil {
			h.logf("  %s: profile: %v", v.Name, err)
		} else {
			res.Profile = profilePath
		}
	}
	metricsText, err := scrape(ctx, "http://"+adminAddr+"/metrics")
	if err != nil {
		h.logf("  %s: scraping /metrics: %v", v.Name, err)
	} else {
		_ = os.WriteFile(filepath.Join(dir, "metrics.txt"), []byte(metricsText), 0o644)
		res.Metrics = ParseMetrics(metricsText, "receipts_", "process_cpu_seconds_total", "go_gc_")
		if w, ok := res.Metrics["receipts_persister_write_duration_seconds_sum"]; ok {
			res.WriteShare = w / res.Seconds
		}
	}
	if err := per.stop(30 * time.Second); err != nil {
		res.Exit = err.Error()
	}

	// Statistics: the persister's sessions flush theirs as they exit.
	if err := benchpg.WaitSessionsGone(ctx, conn, 15*time.Second); err != nil {
		return nil, err
	}
	table1, err := benchpg.ReadTableStats(ctx, conn, "read_receipts")
	if err != nil {
		return nil, err
	}
	res.Table = table1.Sub(table0)
	res.RowsPerEvent = float64(res.Table.Inserted+res.Table.Updated) / events
	if res.Table.Updated > 0 {
		res.HOTRatio = float64(res.Table.HOTUpdated) / float64(res.Table.Updated)
	}
	if wal1, err := benchpg.ReadWALStats(ctx, conn); err == nil {
		res.WALFPI, res.WALRecords = wal1.FPI-wal0.FPI, wal1.Records-wal0.Records
	}

	rows, err := benchpg.ReadAll(ctx, conn, "read_receipts")
	if err != nil {
		return nil, fmt.Errorf("reading the table back: %w", err)
	}
	rows = slices.DeleteFunc(rows, func(r receipt.State) bool { return strings.HasPrefix(r.Key.User, prefillUser) })
	res.Verify = Verify(h.finals, rows)
	if err := br.stop(); err != nil {
		h.logf("  %s: stopping devbroker: %v", v.Name, err)
	}
	return res, nil
}

// pollPostgres is one poll, one round trip: a sample of the persister's
// sessions' states, and the sentinels still short of their final seq (one
// statement probing each key's partition by primary key), or, once none
// is, the whole-table count and sum of read_seq: every row only moves
// forward, to at most its final seq, so the sum equals the final rows' sum
// exactly when every row is final. It returns the sentinels left and
// whether the table is final.
func (h *harness) pollPostgres(ctx context.Context, c *pgx.Conn, sents []sentinel, wantRows, wantSum int64, counts map[string]int) ([]sentinel, bool, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT coalesce(state, 'starting'), coalesce(wait_event_type, ''), coalesce(wait_event, '')
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	full := len(sents) == 0
	if full {
		b.Queue(`SELECT count(*), coalesce(sum(read_seq), 0)::bigint FROM read_receipts`)
	} else {
		users, chans, seqs := make([]string, len(sents)), make([]string, len(sents)), make([]int64, len(sents))
		for i, s := range sents {
			users[i], chans[i], seqs[i] = s.user, s.channel, s.seq
		}
		// A correlated LIMIT 1 subquery is a probe per key whatever the
		// table's size (a join could become a scan of the growing table).
		b.Queue(`SELECT i::int FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS s(u, c, q, i)
WHERE coalesce((SELECT r.read_seq FROM read_receipts r WHERE r.user_id = s.u AND r.channel_id = s.c LIMIT 1), 0) < s.q`, users, chans, seqs)
	}
	br := c.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, false, fmt.Errorf("sampling pg_stat_activity: %w", err)
	}
	for rows.Next() {
		var state, typ, ev string
		if err := rows.Scan(&state, &typ, &ev); err != nil {
			return nil, false, err
		}
		k := state
		if typ != "" {
			k += " / " + typ + ":" + ev
		}
		counts[k]++
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if full {
		var n, sum int64
		if err := br.QueryRow().Scan(&n, &sum); err != nil {
			return nil, false, fmt.Errorf("counting rows: %w", err)
		}
		return nil, n == wantRows && sum == wantSum, nil
	}
	rows, err = br.Query()
	if err != nil {
		return nil, false, fmt.Errorf("probing the sentinel rows: %w", err)
	}
	left, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sentinel, error) {
		var i int
		err := r.Scan(&i)
		return sents[i-1], err
	})
	if err != nil {
		return nil, false, fmt.Errorf("probing the sentinel rows: %w", err)
	}
	return left, false, nil
}

// cpu derives the drain's CPU figures from two snapshots.
func (h *harness) cpu(before, after cpuSnapshot, persister ProcStat, backends map[int]benchpg.Backend, myPID int, wall, events float64) CPUResult {
	sec := func(ticks uint64) float64 { return float64(ticks) / h.clk }
	r := CPUResult{WallSeconds: wall, PostgresBreakdown: map[string]float64{}}
	r.Persister = sec(persister.Ticks())
	r.Broker = sec(after.broker.Ticks() - before.broker.Ticks())
	r.Harness = sec(after.self.Ticks() - before.self.Ticks())
	m := after.machine.Sub(before.machine)
	r.Machine, r.Steal = sec(m.Busy), sec(m.Steal)
	for pid, a := range after.postgres {
		b := before.postgres[pid] // zero when the process started during the drain
		ticks := a.Ticks() - min(b.Ticks(), a.Ticks())
		var cat string
		be, known := backends[pid]
		switch {
		case pid == myPID:
			cat = pgHarness
		case known && be.BackendType == "client backend" && be.DB == h.pg.DB():
			cat = pgPersister
		case known && be.BackendType == "client backend":
			cat = pgOtherClient
		case known:
			cat = pgBackground
		case after.postgres[a.PPID].PID == 0:
			// Its parent is not a postgres process: the postmaster, whose
			// reaped children are the sessions that ended meanwhile.
			cat = pgPostmaster
			r.PostgresBreakdown[pgEnded] += sec(a.ChildTicks() - min(b.ChildTicks(), a.ChildTicks()))
		default:
			cat = pgUnknown
		}
		r.PostgresBreakdown[cat] += sec(ticks)
	}
	r.derive(events)
	return r
}

// pgDrainCategories are the Postgres processes whose CPU is the drain's:
// the persister's sessions (which live through the whole drain), the
// background processes (checkpointer, WAL writer, …) and the postmaster.
// The others are in PostgresAll only: the harness' session, other
// databases' sessions, and sessions that ended during the drain or
// started after it (on a shared server, mostly other users' short
// sessions; an autovacuum worker that ends is among them too).
var pgDrainCategories = map[string]bool{pgPersister: true, pgBackground: true, pgPostmaster: true}

// derive computes the totals and the per-event and per-second figures from
// the measured seconds (also for results read back from result.json).
func (r *CPUResult) derive(events float64) {
	r.Postgres, r.PostgresAll = 0, 0
	for cat, s := range r.PostgresBreakdown {
		r.PostgresAll += s
		if pgDrainCategories[cat] {
			r.Postgres += s
		}
	}
	us := func(s float64) float64 { return s / events * 1e6 }
	r.PersisterUsPerEvent, r.PostgresUsPerEvent = us(r.Persister), us(r.Postgres)
	r.BrokerUsPerEvent, r.MachineUsPerEvent = us(r.Broker), us(r.Machine)
	if r.WallSeconds > 0 {
		r.BusyCores, r.PersisterCores, r.PostgresCores = r.Machine/r.WallSeconds, r.Persister/r.WallSeconds, r.Postgres/r.WallSeconds
	}
}

// fetchProfile saves a CPU profile of seconds from the persister's pprof.
func fetchProfile(ctx context.Context, adminAddr string, seconds int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+15)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", adminAddr, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func scrape(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// prefillUser starts the user id of every prefilled row; the data set's
// users never do.
const prefillUser = "prefill-"

// prefill COPYs n rows of keys the data set never uses into the freshly
// migrated read_receipts (in key order, 100,000 a transaction), then
// vacuums and analyses it and checkpoints (so the drain does not pay for
// flushing the prefill's own dirty pages, as the COPY baselines do not),
// and returns the sum of their read seqs (the drain's completion check
// counts the whole table).
func (h *harness) prefill(ctx context.Context, n int) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	conn, err := h.pg.Connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	h.logf("  prefilling read_receipts with %d rows", n)
	const chunk = 100_000
	const seq = 7
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		rows := make([]receipt.State, 0, end-start)
		for i := start; i < end; i++ {
			c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m7"}
			rows = append(rows, receipt.State{Key: receipt.Key{User: fmt.Sprintf("%s%09d", prefillUser, i/20), Channel: fmt.Sprintf("c%02d", i%20)},
				Read: c, Delivered: c, DeviceID: "d", UpdatedAtUnixMs: 1_700_000_000_000})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"read_receipts"}, cursors.CopyColumns,
			pgx.CopyFromSlice(len(rows), func(j int) ([]any, error) { return cursors.CopyRow(rows[j], time.Now()), nil })); err != nil {
			return 0, err
		}
	}
	for _, sql := range []string{`VACUUM ANALYZE read_receipts`, `CHECKPOINT`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return 0, err
		}
	}
	return int64(n) * seq, nil
}
