package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/readstate/receipts/pkg/receipt"
)

// Defaults.
const (
	TargetDefault           = "http://127.0.0.1:8080"
	PathDefault             = "/v1/receipts:mark"
	DurationDefault         = 10 * time.Second
	UsersDefault            = 1000
	ChannelsDefault         = 50
	DevicesDefault          = 3
	BatchDefault            = 100
	ConcurrencyDefault      = 8
	RequestTimeoutDefault   = 10 * time.Second
	ProgressIntervalDefault = time.Second
	UserPrefixDefault       = "u"
	ChannelPrefixDefault    = "c"
	// MaxBatch matches what one request may carry without being unreasonable
	// for the gateway; the API itself bounds batches too.
	MaxBatch = 10000
)

// Config configures a load run. The zero value of every field means its
// default, so Config{} is a 10-second run against the local gateway.
type Config struct {
	// Target is the gateway's base URL. Defaults to TargetDefault.
	Target string
	// Path is the batch endpoint. Defaults to PathDefault.
	Path string
	// Rate is the offered load in events per second; 0 sends as fast as the
	// workers can.
	Rate float64
	// Duration bounds the run. Defaults to DurationDefault, unless Events
	// is set (then the run lasts until Events are sent).
	Duration time.Duration
	// Events caps the number of events sent; 0 means no cap.
	Events int64
	// Users and Channels size the key space. Default UsersDefault and
	// ChannelsDefault.
	Users    int
	Channels int
	// UserPrefix and ChannelPrefix start the generated ids (tests use unique
	// prefixes to keep runs apart). Default "u" and "c".
	UserPrefix    string
	ChannelPrefix string
	// Devices is the number of device ids marks come from. Defaults to 3.
	Devices int
	// Zipf is the skew s (> 1) of user and channel popularity, drawn from
	// math/rand/v2's Zipf; 0 is uniform.
	Zipf float64
	// Dup is the share of events that resend an earlier event unchanged.
	Dup float64
	// Reorder is the share of events with a seq below the last one sent for
	// the key (late arrivals).
	Reorder float64
	// DeliveredShare is the share of DELIVERED marks; the rest are READ.
	DeliveredShare float64
	// Batch is the number of events per request. Defaults to BatchDefault.
	Batch int
	// Single sends each event alone on its single-mark route
	// (POST /v1/users/{user}/channels/{channel}/read or /delivered) instead
	// of the batch endpoint; Batch must be 1.
	Single bool
	// Concurrency is the number of requests in flight. Defaults to
	// ConcurrencyDefault.
	Concurrency int
	// Seed makes the event stream reproducible.
	Seed uint64
	// RequestTimeout bounds one request. Defaults to RequestTimeoutDefault.
	RequestTimeout time.Duration
	// Model keeps Result.Acked, the per-key model of what was
	// acknowledged (the tests check a server against it). Off by default:
	// it costs a map update per acknowledged event, CPU that a co-located
	// run takes from the system it measures.
	Model bool
	// Gzip asks for compressed responses (Go's client does by default). Off
	// by default: on loopback, compressing a batch's answer only moves
	// gateway CPU into flate and distorts the measurement.
	Gzip bool
	// Dial, when set, opens the connections to Target in place of a TCP
	// dial (tests serve the gateway on an in-memory listener, so that a run
	// lives in a testing/synctest bubble).
	Dial func(addr string) (net.Conn, error)
	// Progress, when set, is called every ProgressInterval while the run
	// lasts, and once more at the end (unless nothing changed since the last call).
	Progress func(Progress)
	// ProgressInterval defaults to ProgressIntervalDefault.
	ProgressInterval time.Duration
	// Lag, when set, samples acknowledged events and measures how long until
	// the durable store holds them.
	Lag *LagConfig
}

// GetFunc reads a user's durable states for the listed channels, e.g.
// (*pgstore.Store).Get.
type GetFunc func(ctx context.Context, user string, channels []string) ([]receipt.State, error)

// Lag sampling defaults.
const (
	SampleEveryDefault  = 100
	MaxPendingDefault   = 32
	MaxSamplesDefault   = 5000
	PollIntervalDefault = 20 * time.Millisecond
	LagTimeoutDefault   = 60 * time.Second
)

// LagConfig configures the end-to-end lag measurement: one acknowledged
// event in SampleEvery is polled for in the durable store until the store
// covers it. The polling itself loads the database, so at most MaxPending
// samples are polled at a time (a sample is skipped when all slots are
// busy) and the measurement's resolution is about PollInterval.
type LagConfig struct {
	// Get reads the durable store. Required.
	Get GetFunc
	// SampleEvery picks one acknowledged event in this many. Default 100.
	SampleEvery int
	// MaxPending bounds samples polled at once. Default 32.
	MaxPending int
	// MaxSamples bounds the samples of a run. Default 5000.
	MaxSamples int
	// PollInterval is the time between polls of a pending sample. Default 20ms.
	PollInterval time.Duration
	// Timeout gives up on a sample this long after its ack. Default 60s.
	Timeout time.Duration
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Target = cmp.Or(c.Target, TargetDefault)
	c.Path = cmp.Or(c.Path, PathDefault)
	if c.Duration == 0 && c.Events == 0 {
		c.Duration = DurationDefault
	}
	c.Users = cmp.Or(c.Users, UsersDefault)
	c.Channels = cmp.Or(c.Channels, ChannelsDefault)
	c.UserPrefix = cmp.Or(c.UserPrefix, UserPrefixDefault)
	c.ChannelPrefix = cmp.Or(c.ChannelPrefix, ChannelPrefixDefault)
	c.Devices = cmp.Or(c.Devices, DevicesDefault)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, RequestTimeoutDefault)
	c.ProgressInterval = cmp.Or(c.ProgressInterval, ProgressIntervalDefault)
	if c.Lag != nil {
		l := *c.Lag
		l.SampleEvery = cmp.Or(l.SampleEvery, SampleEveryDefault)
		l.MaxPending = cmp.Or(l.MaxPending, MaxPendingDefault)
		l.MaxSamples = cmp.Or(l.MaxSamples, MaxSamplesDefault)
		l.PollInterval = cmp.Or(l.PollInterval, PollIntervalDefault)
		l.Timeout = cmp.Or(l.Timeout, LagTimeoutDefault)
		c.Lag = &l
	}
	return c
}

// Validate reports every invalid field of a defaulted config at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if u, err := url.Parse(c.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("target %q is not an http(s) URL", c.Target)
	}
	if c.Rate < 0 {
		bad("rate must be >= 0, got %v", c.Rate)
	}
	if c.Duration < 0 || c.Events < 0 {
		bad("duration and events must be >= 0")
	}
	if c.Users < 1 || c.Channels < 1 || c.Devices < 1 {
		bad("users, channels and devices must be >= 1")
	}
	if c.Zipf != 0 && c.Zipf <= 1 {
		bad("zipf skew must be > 1 (or 0 for uniform), got %v", c.Zipf)
	}
	for name, share := range map[string]float64{"dup": c.Dup, "reorder": c.Reorder, "delivered share": c.DeliveredShare} {
		if share < 0 || share > 1 {
			bad("%s must be within [0, 1], got %v", name, share)
		}
	}
	if c.Dup+c.Reorder > 1 {
		bad("dup + reorder must be <= 1, got %v", c.Dup+c.Reorder)
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		bad("batch must be within [1, %d], got %d", MaxBatch, c.Batch)
	}
	if c.Single && c.Batch != 1 {
		bad("single-mark requests carry one event: batch must be 1, got %d", c.Batch)
	}
	if c.Concurrency < 1 {
		bad("concurrency must be >= 1, got %d", c.Concurrency)
	}
	for _, id := range []string{c.UserPrefix, c.ChannelPrefix} {
		if err := receipt.ValidateID("prefix", id+"0"); err != nil {
			bad("id prefix %q: %w", id, err)
		} else if strings.ContainsAny(id, "/?#%") {
			// The load writes ids into REST paths as they are.
			bad("id prefix %q: holds a character a URL path segment must escape", id)
		}
	}
	if c.Lag != nil && c.Lag.Get == nil {
		bad("lag measurement needs a Get function")
	}
	return errors.Join(errs...)
}
