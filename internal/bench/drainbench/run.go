package drainbench

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/readstate/receipts/internal/bench/benchpg"
)

// Defaults of the harness.
const (
	PartitionsDefault   = 32
	RunsDefault         = 3
	PersisterBinDefault = "bin/persister"
	DevbrokerBinDefault = "bin/devbroker"
	// PGURLDefault is the server; its database is only used to create and
	// drop the bench's own.
	PGURLDefault      = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	PGDatabaseDefault = "receipts_bench"
	// GroupDefault is the persister's default consumer group, whose
	// committed offsets the harness watches.
	GroupDefault        = "receipts-persister"
	PollIntervalDefault = 50 * time.Millisecond
	DrainTimeoutDefault = 10 * time.Minute
	NaiveEventsDefault  = 50_000
	NaiveConnsDefault   = 16
	OutDirDefault       = ".run/bench"
)

// Variant is one persister build and its extra arguments.
type Variant struct {
	// Name is a letter, A for the first (the reference of the ratios).
	Name string   `json:"name"`
	Bin  string   `json:"bin"`
	Args []string `json:"args"`
	// Build is the binary's VCS stamp: revision, "+dirty" when built from
	// a modified tree.
	Build string `json:"build"`
}

// Label is the variant as a table header: "A: bin/persister --writers 1".
func (v Variant) Label() string {
	return strings.TrimSpace(v.Name + ": " + v.Bin + " " + strings.Join(v.Args, " "))
}

// Config configures a run.
type Config struct {
	Data DataConfig
	// Partitions of the topic.
	Partitions int
	// Runs is the number of rounds; every round drains with every variant
	// (in an order rotated each round) and measures the baselines.
	Runs int
	// PersisterBins and PersisterArgs make the variants: every binary with
	// every argument list (split on spaces), in that order.
	PersisterBins []string
	PersisterArgs []string
	DevbrokerBin  string
	// PGURL is the Postgres server; PGDatabase the bench's database
	// (dropped and recreated; its name must contain "bench").
	PGURL      string
	PGDatabase string
	// Group is the consumer group the persister joins.
	Group        string
	PollInterval time.Duration
	DrainTimeout time.Duration
	// Copy enables the COPY baselines; NaiveEvents > 0 the naive one,
	// over that many events on NaiveConns connections.
	Copy        bool
	NaiveEvents int
	NaiveConns  int
	// PrefillRows > 0 fills read_receipts with that many rows of other
	// keys (prefillUser%d) before each drain: the cost of a large table
	// (compare a drain into a 10M-row table with one into a 100k-row
	// table).
	PrefillRows int
	// PprofSeconds > 0 adds one unmeasured drain by variant A during which
	// a CPU profile of that many seconds is taken from the persister.
	PprofSeconds int
	// OutDir receives the run's directory, persister-<UTC time>.
	OutDir string
	// CommandLine is recorded in the report.
	CommandLine string
	// Log receives progress lines. Defaults to io.Discard.
	Log io.Writer
}

// DefaultConfig is `make bench-persister`'s run.
func DefaultConfig() Config {
	return Config{
		Data:          DefaultDataConfig(),
		Partitions:    PartitionsDefault,
		Runs:          RunsDefault,
		PersisterBins: []string{PersisterBinDefault},
		PersisterArgs: []string{""},
		DevbrokerBin:  DevbrokerBinDefault,
		PGURL:         PGURLDefault,
		PGDatabase:    PGDatabaseDefault,
		Group:         GroupDefault,
		PollInterval:  PollIntervalDefault,
		DrainTimeout:  DrainTimeoutDefault,
		Copy:          true,
		NaiveEvents:   NaiveEventsDefault,
		NaiveConns:    NaiveConnsDefault,
		OutDir:        OutDirDefault,
	}
}

func (c Config) validate() error {
	errs := []error{c.Data.Validate()}
	if c.PrefillRows < 0 {
		errs = append(errs, fmt.Errorf("prefill rows must be >= 0, got %d", c.PrefillRows))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions must be > 0, got %d", c.Partitions))
	}
	if c.Runs < 1 {
		errs = append(errs, fmt.Errorf("runs must be > 0, got %d", c.Runs))
	}
	if len(c.PersisterBins) == 0 || len(c.PersisterArgs) == 0 {
		errs = append(errs, errors.New("at least one persister binary and one argument list (possibly empty)"))
	}
	if c.PollInterval <= 0 || c.DrainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("poll interval and drain timeout must be > 0, got %s and %s", c.PollInterval, c.DrainTimeout))
	}
	if c.NaiveEvents < 0 || (c.NaiveEvents > 0 && c.NaiveConns < 1) {
		errs = append(errs, fmt.Errorf("naive events must be >= 0 and naive conns > 0, got %d and %d", c.NaiveEvents, c.NaiveConns))
	}
	if c.PprofSeconds < 0 {
		errs = append(errs, fmt.Errorf("pprof seconds must be >= 0, got %d", c.PprofSeconds))
	}
	if c.Group == "" || c.OutDir == "" || c.DevbrokerBin == "" {
		errs = append(errs, errors.New("group, out dir and devbroker binary must be set"))
	}
	return errors.Join(errs...)
}

// variants is every binary × argument list.
func (c Config) variants() []Variant {
	var out []Variant
	for _, bin := range c.PersisterBins {
		for _, args := range c.PersisterArgs {
			out = append(out, Variant{Name: string(rune('A' + len(out))), Bin: bin, Args: strings.Fields(args), Build: buildStamp(bin)})
		}
	}
	return out
}

// Result is everything a run measured; it is written as result.json.
type Result struct {
	Started        time.Time      `json:"started"`
	Finished       time.Time      `json:"finished"`
	Dir            string         `json:"dir"`
	CommandLine    string         `json:"command_line"`
	Machine        MachineInfo    `json:"machine"`
	Config         ConfigReport   `json:"config"`
	Dataset        DatasetStats   `json:"dataset"`
	DatasetSeconds float64        `json:"dataset_seconds"`
	Variants       []Variant      `json:"variants"`
	Drains         []*DrainResult `json:"drains"`
	Baselines      []*Baselines   `json:"baselines"`
	// ProfileDrain is the unmeasured drain the CPU profile was taken in.
	ProfileDrain *DrainResult `json:"profile_drain,omitempty"`
	Summary      Summary      `json:"summary"`
	Failures     []string     `json:"failures,omitempty"`
}

// ConfigReport is the configuration as reported.
type ConfigReport struct {
	Data         DataConfig `json:"data"`
	Partitions   int        `json:"partitions"`
	Runs         int        `json:"runs"`
	PGDatabase   string     `json:"pg_database"`
	PollInterval string     `json:"poll_interval"`
	NaiveEvents  int        `json:"naive_events"`
	NaiveConns   int        `json:"naive_conns"`
	Copy         bool       `json:"copy"`
	PrefillRows  int        `json:"prefill_rows"`
}

// MachineInfo describes where the run ran.
type MachineInfo struct {
	NumCPU       int                `json:"nproc"`
	CPUModel     string             `json:"cpu_model"`
	MemoryGiB    float64            `json:"memory_gib"`
	Kernel       string             `json:"kernel"`
	OS           string             `json:"os"`
	Go           string             `json:"go"`
	Postgres     benchpg.ServerInfo `json:"postgres"`
	Redis        string             `json:"redis"`
	LoadAvgStart string             `json:"loadavg_at_start"`
	LoadAvgEnd   string             `json:"loadavg_at_end"`
	// Commit is the harness' working tree (git rev-parse HEAD, "+dirty").
	Commit string `json:"commit"`
}

type harness struct {
	cfg    Config
	pg     *benchpg.Server
	ds     *Dataset
	finals []Final
	stats  DatasetStats
	clk    float64
	log    io.Writer
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "receiptsbench: "+format+"\n", args...)
}

// Run measures; the Result holds whatever was measured even when an error
// stops the run. A row that differs from its final value fails the run
// (after every round is reported).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	pg, err := benchpg.NewServer(cfg.PGURL, cfg.PGDatabase)
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, pg: pg, clk: ClockTicks(), log: cfg.Log}
	variants := cfg.variants()
	for _, bin := range append([]string{cfg.DevbrokerBin}, cfg.PersisterBins...) {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("binary %s: %w (make bench-persister builds bin/)", bin, err)
		}
	}
	started := time.Now().UTC()
	dir := filepath.Join(cfg.OutDir, "persister-"+started.Format("20060102T150405Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res := &Result{
		Started: started, Dir: dir, CommandLine: cfg.CommandLine, Variants: variants,
		Config: ConfigReport{Data: cfg.Data, Partitions: cfg.Partitions, Runs: cfg.Runs, PGDatabase: cfg.PGDatabase,
			PollInterval: cfg.PollInterval.String(), NaiveEvents: cfg.NaiveEvents, NaiveConns: cfg.NaiveConns, Copy: cfg.Copy, PrefillRows: cfg.PrefillRows},
	}
	res.Machine = h.machine(ctx)
	h.logf("results in %s", dir)

	t := time.Now()
	if h.ds, err = Generate(cfg.Data); err != nil {
		return nil, err
	}
	h.finals = h.ds.Finals(len(h.ds.Events))
	h.stats = h.ds.Stats(h.finals)
	res.Dataset, res.DatasetSeconds = h.stats, time.Since(t).Seconds()
	h.logf("data set: %d events, %d distinct keys, %d advancing (%.1fs)", h.stats.Events, h.stats.DistinctKeys, h.stats.Advancing, res.DatasetSeconds)

	err = h.rounds(ctx, res, variants, dir)
	res.Machine.LoadAvgEnd = LoadAvg()
	res.Finished = time.Now().UTC()
	res.Summary = Summarize(res)
	if werr := writeResult(res, dir); werr != nil {
		err = errors.Join(err, werr)
	}
	if err == nil && len(res.Failures) > 0 {
		err = fmt.Errorf("%d failures: %s", len(res.Failures), strings.Join(res.Failures, "; "))
	}
	return res, err
}

func (h *harness) rounds(ctx context.Context, res *Result, variants []Variant, dir string) error {
	for r := 1; r <= h.cfg.Runs; r++ {
		h.logf("round %d of %d", r, h.cfg.Runs)
		for k := range variants {
			// Rotated each round, so no variant always runs first.
			v := variants[(k+r-1)%len(variants)]
			d, err := h.drain(ctx, r, v, filepath.Join(dir, fmt.Sprintf("round%d-%s", r, v.Name)), 0)
			if err != nil {
				return fmt.Errorf("round %d, variant %s: %w", r, v.Name, err)
			}
			h.logf("  %s: %.0f events/s in %.2fs, %.3f rows/event, HOT %.2f, %.1f µs machine CPU/event; %s",
				v.Name, d.EventsPerSec, d.Seconds, d.RowsPerEvent, d.HOTRatio, d.CPU.MachineUsPerEvent, d.Verify)
			if !d.Verify.OK() {
				res.Failures = append(res.Failures, fmt.Sprintf("round %d variant %s: %s", r, v.Name, d.Verify))
			}
			res.Drains = append(res.Drains, d)
		}
		if h.cfg.Copy || h.cfg.NaiveEvents > 0 {
			b, err := h.baselines(ctx, r, variants[0].Bin, filepath.Join(dir, fmt.Sprintf("round%d-baselines", r)))
			if err != nil {
				return fmt.Errorf("round %d baselines: %w", r, err)
			}
			if b.Naive != nil && !b.Naive.Verify.OK() {
				res.Failures = append(res.Failures, fmt.Sprintf("round %d naive baseline: %s", r, b.Naive.Verify))
			}
			res.Baselines = append(res.Baselines, b)
		}
		if err := writeResult(res, dir); err != nil {
			return err
		}
	}
	if h.cfg.PprofSeconds > 0 {
		h.logf("profile drain (unmeasured): %ds CPU profile of variant %s", h.cfg.PprofSeconds, variants[0].Name)
		d, err := h.drain(ctx, 0, variants[0], filepath.Join(dir, "profile-"+variants[0].Name), h.cfg.PprofSeconds)
		if err != nil {
			return fmt.Errorf("profile drain: %w", err)
		}
		if !d.Verify.OK() {
			res.Failures = append(res.Failures, fmt.Sprintf("profile drain: %s", d.Verify))
		}
		res.ProfileDrain = d
		if d.Profile != "" {
			h.logf("  profile: go tool pprof -top %s %s", variants[0].Bin, d.Profile)
		}
	}
	return nil
}

// Rerender reads a run's result.json, recomputes its derived figures and
// summary with this build's definitions, and rewrites result.json and
// summary.md; the measured figures are left as they were.
func Rerender(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("reading %s/result.json: %w", dir, err)
	}
	events := float64(res.Dataset.Events)
	for _, d := range append(slices.Clone(res.Drains), res.ProfileDrain) {
		if d != nil {
			d.CPU.derive(events)
		}
	}
	res.Summary = Summarize(&res)
	return &res, writeResult(&res, dir)
}

func writeResult(res *Result, dir string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(Markdown(res)), 0o644)
}

// machine collects the machine's description; what cannot be read is
// left empty.
func (h *harness) machine(ctx context.Context) MachineInfo {
	m := MachineInfo{NumCPU: runtime.NumCPU(), Go: runtime.Version(), LoadAvgStart: LoadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for line := range strings.Lines(string(b)) {
			if _, err := fmt.Sscanf(line, "MemTotal: %g kB", &kb); err == nil {
				m.MemoryGiB = kb / (1 << 20)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "redis-cli", "info", "server").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = v
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += "+dirty"
		}
	}
	if c, err := h.pg.AdminConnect(ctx); err == nil {
		m.Postgres, _ = benchpg.ReadServerInfo(ctx, c)
		_ = c.Close(ctx)
	}
	return m
}

// buildStamp identifies a binary: the VCS revision Go stamped into it, or
// else (builds with -buildvcs=false) its SHA-256 prefix and modification
// time.
func buildStamp(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return ""
	}
	sum := ""
	if f, err := os.Open(bin); err == nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			sum = "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
			if st, err := f.Stat(); err == nil {
				sum += " built " + st.ModTime().UTC().Format(time.RFC3339)
			}
		}
		f.Close()
	}
	var rev, modified, at string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	if rev == "" {
		return strings.TrimSpace(sum + " " + info.GoVersion)
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return strings.TrimSpace(rev + " " + at + " " + info.GoVersion)
}
