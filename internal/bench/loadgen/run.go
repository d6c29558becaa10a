package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// Progress is a running total, reported every ProgressInterval.
type Progress struct {
	Elapsed time.Duration
	// Sent counts events in requests sent; Acked those acknowledged.
	Sent   int64
	Acked  int64
	Errors int64 // failed requests
	// Rate is acknowledged events per second over the last interval.
	Rate float64
	// P99 is the request latency p99 over the last interval.
	P99 time.Duration
	// LagPending is the number of lag samples not yet seen in Postgres.
	LagPending int
}

func (p Progress) String() string {
	s := fmt.Sprintf("%6.1fs  sent %d  acked %d  errors %d  rate %.0f ev/s  p99 %s",
		p.Elapsed.Seconds(), p.Sent, p.Acked, p.Errors, p.Rate, round(p.P99))
	if p.LagPending > 0 {
		s += fmt.Sprintf("  lag-samples pending %d", p.LagPending)
	}
	return s
}

// Result is the outcome of a run.
type Result struct {
	// Sent counts events in requests sent (acknowledged or not).
	Sent int64 `json:"sent"`
	// AckedEvents counts events the gateway acknowledged (durable in Kafka
	// or in its spool).
	AckedEvents int64 `json:"acked"`
	// Failed counts events in failed requests; they are not in Acked.
	Failed int64 `json:"failed"`
	// Advanced counts acknowledged events that moved a cursor.
	Advanced int64 `json:"advanced"`
	// Spooled counts acknowledged events made durable in the spool, not Kafka.
	Spooled int64 `json:"spooled"`
	// RealtimeDegraded counts acknowledged events Redis did not take.
	RealtimeDegraded int64 `json:"realtime_degraded"`
	Requests         int64 `json:"requests"`
	// Errors counts failed requests by kind ("http 503 unavailable",
	// "transport", "timeout", "bad response", …); ErrorSamples keeps one
	// message per kind.
	Errors       map[string]int64  `json:"errors,omitempty"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	Elapsed      time.Duration     `json:"-"`
	// EventsPerSec is acknowledged events per second over the run.
	EventsPerSec float64 `json:"events_per_sec"`
	// Latency is of successful requests (one batch each).
	Latency Percentiles `json:"latency"`
	// Lag is the end-to-end lag (ack → Postgres holds it), when measured.
	Lag *LagResult `json:"e2e_lag,omitempty"`
	// Keys is the number of keys with an acknowledged event.
	Keys int `json:"keys"`
	// Acked is the model (kept when Config.Model is set): per key, the
	// greatest read and delivered positions acknowledged by the gateway.
	// Every store must cover it once the system is quiet.
	Acked map[receipt.Key]receipt.State `json:"-"`
}

// MarshalJSON adds the elapsed time in seconds.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		ElapsedSeconds float64 `json:"elapsed_s"`
	}{plain(r), r.Elapsed.Seconds()})
}

// ErrorCount is the number of failed requests.
func (r Result) ErrorCount() int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Summary is a human-readable multi-line summary.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "events:   sent %d  acked %d  failed %d  (advanced %d, spooled %d, realtime-degraded %d)\n",
		r.Sent, r.AckedEvents, r.Failed, r.Advanced, r.Spooled, r.RealtimeDegraded)
	fmt.Fprintf(&b, "rate:     %.0f acked events/s over %s (%d requests, %d keys)\n",
		r.EventsPerSec, r.Elapsed.Round(time.Millisecond), r.Requests, r.Keys)
	fmt.Fprintf(&b, "latency:  %s\n", r.Latency)
	if len(r.Errors) > 0 {
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(&b, "errors:   %-28s %d  e.g. %s\n", k, r.Errors[k], r.ErrorSamples[k])
		}
	}
	if r.Lag != nil {
		fmt.Fprintf(&b, "e2e lag:  %s", r.Lag.Percentiles)
		if r.Lag.TimedOut > 0 || r.Lag.Skipped > 0 || r.Lag.Errors > 0 {
			fmt.Fprintf(&b, "  timed out %d, skipped %d, read errors %d", r.Lag.TimedOut, r.Lag.Skipped, r.Lag.Errors)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// batch is one request's events.
type batch []Event

// runner holds the shared state of one run.
type runner struct {
	cfg    Config
	client *fasthttp.Client
	url    string
	base   string // target without a trailing slash
	lat    histogram
	lag    *lagSampler
	// keys has a bit per key of the run, set once the key has an
	// acknowledged event (Result.Keys without a model).
	keys []atomic.Uint64

	sent, acked, failed, requests atomic.Int64
	advanced, spooled, degraded   atomic.Int64
	errCount                      atomic.Int64

	mu           sync.Mutex
	errors       map[string]int64
	errorSamples map[string]string
}

// Run sends load until the duration passes, the event cap is reached or ctx
// ends, waits for requests in flight and for pending lag samples, and
// returns the totals. An error means the run could not start (bad config);
// failed requests are counted in the Result, not returned.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("validating load config: %w", err)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, cfg.RequestTimeout) }
	}
	r := &runner{
		cfg: cfg,
		// fasthttp's client, not net/http's: on a co-located stack the
		// tool's CPU is taken from the system it measures, and net/http's
		// client spends CPU per request on its read and write loops (a
		// goroutine hand-off each way) where this one reads and writes on
		// the caller's goroutine.
		client: &fasthttp.Client{
			MaxConnsPerHost:          cfg.Concurrency,
			MaxConnWaitTimeout:       cfg.RequestTimeout,
			MaxResponseBodySize:      maxResponseBytes,
			NoDefaultUserAgentHeader: true,
			DisablePathNormalizing:   true, // the ids are escaped already
			// Go's dialer, not fasthttp's default (its DNS cache keeps a
			// goroutine for the life of the process): the tool dials
			// Concurrency connections once.
			Dial: dial,
		},
		url:          strings.TrimSuffix(cfg.Target, "/") + cfg.Path,
		base:         strings.TrimSuffix(cfg.Target, "/"),
		keys:         make([]atomic.Uint64, (int64(cfg.Users)*int64(cfg.Channels)+63)/64),
		errors:       map[string]int64{},
		errorSamples: map[string]string{},
	}
	defer r.client.CloseIdleConnections()
	if cfg.Lag != nil {
		r.lag = newLagSampler(*cfg.Lag)
	}

	start := time.Now()
	genCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		genCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}

	// The poller runs until the load and all pending samples are done.
	lagDone := make(chan struct{})
	lagCtx, stopLag := context.WithCancel(ctx)
	defer stopLag()
	if r.lag != nil {
		go func() { defer close(lagDone); r.lag.poll(lagCtx) }()
	} else {
		close(lagDone)
	}

	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() { defer close(progressDone); r.report(start, stopProgress) }()

	batches := make(chan batch, cfg.Concurrency)
	models := make([]map[receipt.Key]receipt.State, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		if cfg.Model {
			models[i] = map[receipt.Key]receipt.State{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bufs sendBuffers
			for b := range batches {
				r.send(ctx, b, models[i], &bufs)
			}
		}()
	}
	r.generate(genCtx, start, cfg.Duration, batches)
	close(batches)
	wg.Wait()
	elapsed := time.Since(start)

	if r.lag != nil {
		r.lag.finish()
		<-lagDone
	}
	close(stopProgress)
	<-progressDone

	res := Result{
		Sent:             r.sent.Load(),
		AckedEvents:      r.acked.Load(),
		Failed:           r.failed.Load(),
		Advanced:         r.advanced.Load(),
		Spooled:          r.spooled.Load(),
		RealtimeDegraded: r.degraded.Load(),
		Requests:         r.requests.Load(),
		Errors:           r.errors,
		ErrorSamples:     r.errorSamples,
		Elapsed:          elapsed,
		Latency:          r.lat.Percentiles(),
		Acked:            models[0],
	}
	for _, m := range models[1:] {
		for k, st := range m {
			res.Acked[k], _ = receipt.Merge(res.Acked[k], st)
		}
	}
	for i := range r.keys {
		res.Keys += bits.OnesCount64(r.keys[i].Load())
	}
	if elapsed > 0 {
		res.EventsPerSec = float64(res.AckedEvents) / elapsed.Seconds()
	}
	if r.lag != nil {
		lr := r.lag.result()
		res.Lag = &lr
	}
	return res, nil
}

// generate feeds batches to the workers at the configured rate. When the
// workers fall behind, the channel blocks and the offered load drops to what
// they sustain (a closed-loop fallback; the progress rate shows it). A paced
// run offers no batch due at or after start+d (the context's own deadline
// races the pacing timer, and either may fire first) and still lasts d.
func (r *runner) generate(ctx context.Context, start time.Time, d time.Duration, out chan<- batch) {
	g := NewGenerator(r.cfg)
	var emitted int64
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for ctx.Err() == nil {
		n := int64(r.cfg.Batch)
		if r.cfg.Events > 0 {
			n = min(n, r.cfg.Events-emitted)
			if n <= 0 {
				return
			}
		}
		if r.cfg.Rate > 0 {
			offset := time.Duration(float64(emitted) / r.cfg.Rate * float64(time.Second))
			if d > 0 && offset >= d {
				<-ctx.Done() // the run still lasts d
				return
			}
			due := start.Add(offset)
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		}
		b := make(batch, n)
		for i := range b {
			b[i] = g.Next()
		}
		select {
		case <-ctx.Done():
			return
		case out <- b:
			emitted += n
		}
	}
}

// report calls cfg.Progress every interval until stop closes, then once
// more unless nothing changed since the last call.
func (r *runner) report(start time.Time, stop <-chan struct{}) {
	if r.cfg.Progress == nil {
		<-stop
		return
	}
	tick := time.NewTicker(r.cfg.ProgressInterval)
	defer tick.Stop()
	prevAcked, prevTime := int64(0), start
	var prevSent, prevErrs int64
	emitted := false
	emit := func(final bool) {
		now := time.Now()
		// A final line that repeats the last one would only show a rate of
		// 0 over a sliver of time: skip it.
		if final && emitted && r.sent.Load() == prevSent && r.acked.Load() == prevAcked && r.errCount.Load() == prevErrs {
			return
		}
		emitted = true
		acked := r.acked.Load()
		p := Progress{
			Elapsed: now.Sub(start),
			Sent:    r.sent.Load(),
			Acked:   acked,
			Errors:  r.errCount.Load(),
			P99:     r.lat.IntervalQuantile(0.99),
		}
		if dt := now.Sub(prevTime).Seconds(); dt > 0 {
			p.Rate = float64(acked-prevAcked) / dt
		}
		if r.lag != nil {
			p.LagPending = r.lag.pendingCount()
		}
		prevAcked, prevTime = acked, now
		prevSent, prevErrs = p.Sent, p.Errors
		r.cfg.Progress(p)
	}
	for {
		select {
		case <-stop:
			emit(true)
			return
		case <-tick.C:
			emit(false)
		}
	}
}

// markResponse is the part of MarkReceiptsResponse the tool reads. protojson
// writes lowerCamelCase names; the snake_case spelling is accepted too.
type markResponse struct {
	Results []markResult `json:"results"`
	// Result is the single-mark routes' answer.
	Result *markResult `json:"result"`
}

type markResult struct {
	Advanced              bool   `json:"advanced"`
	Durability            string `json:"durability"`
	RealtimeDegraded      bool   `json:"realtimeDegraded"`
	RealtimeDegradedSnake bool   `json:"realtime_degraded"`
}

// sendBuffers are one worker's request and response buffers, reused so
// the generator spends little of the CPU it measures.
type sendBuffers struct {
	body    bytes.Buffer
	url     strings.Builder
	req     fasthttp.Request
	resp    fasthttp.Response
	results []markResult
}

// maxResponseBytes bounds an answer the tool reads.
const maxResponseBytes = 64 << 20

// encodeSingle writes a single-mark route's body (user and channel are in
// the path).
func encodeSingle(buf *bytes.Buffer, e Event) {
	buf.WriteString(`{"seq":`)
	encodeMark(buf, e)
}

// encodeMark writes a mark's seq, message and device and closes it.
func encodeMark(buf *bytes.Buffer, e Event) {
	buf.WriteString(strconv.FormatInt(e.Seq, 10))
	buf.WriteString(`,"message_id":`)
	writeString(buf, e.MessageID)
	buf.WriteString(`,"device_id":`)
	writeString(buf, e.DeviceID)
	buf.WriteByte('}')
}

// singleURL is the single-mark route of e: /v1/users/{user}/channels/{channel}/read or /delivered.
func (r *runner) singleURL(sb *strings.Builder, e Event) string {
	sb.Reset()
	sb.WriteString(r.base)
	sb.WriteString("/v1/users/")
	sb.WriteString(url.PathEscape(e.Key.User))
	sb.WriteString("/channels/")
	sb.WriteString(url.PathEscape(e.Key.Channel))
	if e.Kind == KindDelivered {
		sb.WriteString("/delivered")
	} else {
		sb.WriteString("/read")
	}
	return sb.String()
}

// encode writes the MarkReceiptsRequest JSON body by hand: it is the tool's
// hot path and the shape is fixed.
func encode(buf *bytes.Buffer, b batch) {
	buf.WriteString(`{"receipts":[`)
	for i, e := range b {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"user_id":`)
		writeString(buf, e.Key.User)
		buf.WriteString(`,"channel_id":`)
		writeString(buf, e.Key.Channel)
		buf.WriteString(`,"kind":"`)
		buf.WriteString(string(e.Kind))
		buf.WriteString(`","seq":`)
		encodeMark(buf, e)
	}
	buf.WriteString(`]}`)
}

// writeString writes s as a JSON string: as it is when it needs no
// escaping (generated ids always), else as encoding/json writes it.
func writeString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			q, _ := json.Marshal(s)
			buf.Write(q)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

// jsonPlain marks the bytes encoding/json writes as they are (a table:
// four ids an event are tested byte by byte on the tool's hot path).
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// send posts one batch and records the outcome; acknowledged events are
// merged into model (nil: no model).
func (r *runner) send(ctx context.Context, b batch, model map[receipt.Key]receipt.State, bufs *sendBuffers) {
	if ctx.Err() != nil {
		// fasthttp takes no context: a canceled run sends nothing more,
		// and a request in flight ends by RequestTimeout at the latest.
		r.sent.Add(int64(len(b)))
		r.requests.Add(1)
		r.fail(len(b), "canceled", ctx.Err().Error())
		return
	}
	bufs.body.Reset()
	target := r.url
	if r.cfg.Single {
		encodeSingle(&bufs.body, b[0])
		target = r.singleURL(&bufs.url, b[0])
	} else {
		encode(&bufs.body, b)
	}
	r.sent.Add(int64(len(b)))
	r.requests.Add(1)

	req, resp := &bufs.req, &bufs.resp
	req.Reset()
	resp.Reset()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(target)
	req.Header.SetContentType("application/json")
	if r.cfg.Gzip {
		req.Header.Set(fasthttp.HeaderAcceptEncoding, "gzip")
	}
	req.SetBodyRaw(bufs.body.Bytes())
	t0 := time.Now()
	if err := r.client.DoTimeout(req, resp, r.cfg.RequestTimeout); err != nil {
		kind := "transport"
		switch {
		case ctx.Err() != nil:
			kind = "canceled"
		case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrNoFreeConns):
			kind = "timeout"
		}
		r.fail(len(b), kind, err.Error())
		return
	}
	raw := resp.Body()
	if string(resp.Header.ContentEncoding()) == "gzip" { // compared without a copy
		var err error
		if raw, err = resp.BodyGunzip(); err != nil {
			r.fail(len(b), "transport", "reading response: "+err.Error())
			return
		}
	}
	lat := time.Since(t0)
	if code := resp.StatusCode(); code != http.StatusOK {
		kind := "http " + strconv.Itoa(code)
		if code := errorCode(raw); code != "" {
			kind += " " + code
		}
		if reason := apierr.InfoOfREST(raw).GetReason(); reason != "" {
			kind += " " + reason
		}
		r.fail(len(b), kind, truncate(string(raw), 200))
		return
	}
	mr := markResponse{Results: bufs.results[:0]}
	if err := decodeMarkResponse(raw, &mr); err != nil {
		r.fail(len(b), "bad response", "decoding response: "+err.Error())
		return
	}
	if mr.Result != nil {
		mr.Results = append(mr.Results, *mr.Result)
	}
	bufs.results = mr.Results[:0]
	if len(mr.Results) != len(b) {
		r.fail(len(b), "bad response", fmt.Sprintf("%d results for %d receipts", len(mr.Results), len(b)))
		return
	}
	r.lat.Record(lat)
	ackedAt := time.Now()
	var advanced, spooled, degraded int64
	for i, res := range mr.Results {
		if model != nil {
			st := b[i].State()
			model[st.Key], _ = receipt.Merge(model[st.Key], st)
		}
		r.keys[b[i].index/64].Or(1 << (b[i].index % 64))
		if res.Advanced {
			advanced++
		}
		if res.Durability == "SPOOLED" {
			spooled++
		}
		if res.RealtimeDegraded || res.RealtimeDegradedSnake {
			degraded++
		}
	}
	r.advanced.Add(advanced)
	r.spooled.Add(spooled)
	r.degraded.Add(degraded)
	before := r.acked.Add(int64(len(b))) - int64(len(b))
	if r.lag != nil {
		r.lag.offer(b, before, ackedAt)
	}
}

func (r *runner) fail(events int, kind, msg string) {
	r.failed.Add(int64(events))
	r.errCount.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[kind]++
	if _, ok := r.errorSamples[kind]; !ok {
		r.errorSamples[kind] = msg
	}
}

// grpcCodes names the gRPC status codes, as Connect spells them.
var grpcCodes = []string{"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
	"already_exists", "permission_denied", "resource_exhausted", "failed_precondition", "aborted",
	"out_of_range", "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated"}

// errorCode reads the code of an error body: Connect writes {"code":
// "unavailable"}, REST transcoding writes google.rpc.Status {"code": 14}.
func errorCode(body []byte) string {
	var e struct{ Code json.RawMessage }
	if json.Unmarshal(body, &e) != nil || len(e.Code) == 0 {
		return ""
	}
	var name string
	if json.Unmarshal(e.Code, &name) == nil {
		return name
	}
	var n int
	if json.Unmarshal(e.Code, &n) == nil && n >= 0 && n < len(grpcCodes) {
		return grpcCodes[n]
	}
	return ""
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
