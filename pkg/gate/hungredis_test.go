package gate_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// A hung Redis degrades a mark and a read within --redis-timeout's bound,
// per round trip: the product's client honours the call's deadline on the
// socket (redisstore.ClientConfig), where go-redis alone waits its read
// timeout (5 s) for every command.
func TestHungRedisDegradesWithinItsTimeout(t *testing.T) {
	t.Parallel()
	rdb, err := redisstore.ClientConfig{URL: "redis://" + redistest.Hung(t) + "/0?max_retries=-1"}.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	stack := gatetest.Start(t, gatetest.Options{NoWatch: true, Config: func(c *gatetest.Config) {
		c.Gate.Redis = rdb
		c.Gate.RedisTimeout = 100 * time.Millisecond
		// A read that cannot tell whether Redis lost data waits for the
		// persister up to the restore timeout (none runs here).
		c.Gate.Restore.Timeout = 1500 * time.Millisecond
	}})

	began := time.Now()
	resp, err := http.Post(stack.URL+"/v1/users/alice/channels/general/read", "application/json", strings.NewReader(`{"seq":5}`))
	require.NoError(t, err)
	body := readAll(t, resp)
	took := time.Since(began)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"realtimeDegraded":true`, "made durable without Redis")
	// Each Redis step of the write waits at most 100 ms; the old client
	// waited 5 s for the first alone.
	require.Less(t, took, 4*time.Second, "a hung Redis held the mark %s", took)

	// Another user's read (alice's would wait for her restore: her
	// write did not reach Redis) answers from Postgres.
	began = time.Now()
	resp, err = http.Get(stack.URL + "/v1/users/bob/read-state?channel_id=general")
	require.NoError(t, err)
	body = readAll(t, resp)
	took = time.Since(began)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Less(t, took, 4*time.Second, "a hung Redis held the read %s: %s", took, body)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
