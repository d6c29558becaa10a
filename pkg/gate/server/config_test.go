package server

import (
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/producer"
)

func TestConfigReportsEveryBadField(t *testing.T) {
	t.Parallel()
	c := Config{MaxBodyBytes: 10, WriteTimeout: time.Second, ShutdownTimeout: -time.Second}.withDefaults(gate.MaxBatchItemsDefault)
	err := c.validate(gate.MaxBatchItemsDefault, 2*time.Second)
	for _, want := range []string{
		"MaxBodyBytes: must be within [1KiB, 64MiB], got 10",
		"ShutdownTimeout: must be positive",
		"WriteTimeout: 1s leaves no room for a call",
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults(gate.MaxBatchItemsDefault)
	require.Equal(t, AddrDefault, c.Addr)
	require.Equal(t, int64(1<<20), c.MaxBodyBytes)
	require.Greater(t, c.WriteTimeout, producer.ProduceTimeoutDefault+gate.RedisTimeoutDefault)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Registerer)
	require.NoError(t, c.validate(gate.MaxBatchItemsDefault, producer.ProduceTimeoutDefault+gate.RedisTimeoutDefault))
}

// TestAuthRequiredOffLoopback: a non-loopback API without authentication
// does not start unless told to; loopback stays open by default (every
// other test of the gate serves open on 127.0.0.1).
func TestAuthRequiredOffLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{":8080", "0.0.0.0:8080", "10.1.2.3:8080"} {
		err := Config{Addr: addr}.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0)
		require.ErrorContains(t, err, "is not loopback and no authentication is configured", addr)
		err = Config{Addr: addr, Auth: apiauth.Config{InsecureAllowUnauthenticated: true}}.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0)
		require.NotContains(t, errString(err), "authentication", addr)
	}
	require.NotContains(t, errString(Config{Addr: "127.0.0.1:8080"}.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0)), "authentication")
	require.ErrorContains(t, Config{Auth: apiauth.Config{RateLimit: 5, RateLimitBurst: 100}}.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0), "RateLimitBurst: 100 is below MaxBatchItems 500")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestCORSOriginsFlag: the flag takes a comma list; an origin that is not
// scheme://host[:port] (a wildcard, a path) fails validation, named.
func TestCORSOriginsFlag(t *testing.T) {
	t.Parallel()
	var c Config
	fs := flag.NewFlagSet("kafkagate", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--cors-allowed-origins", "https://chat.example.com, http://localhost:3000"}))
	require.Equal(t, []string{"https://chat.example.com", "http://localhost:3000"}, c.CORSAllowedOrigins)
	require.NoError(t, c.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0))

	for _, bad := range []string{"*", "https://*.example.com", "https://chat.example.com/", "chat.example.com", "ftp://x", "null"} {
		c.CORSAllowedOrigins = []string{bad}
		err := c.withDefaults(gate.MaxBatchItemsDefault).validate(gate.MaxBatchItemsDefault, 0)
		require.ErrorContains(t, err, "CORSAllowedOrigins: "+strconv.Quote(bad), bad)
	}
}
