package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// post sends a JSON body to the gateway and requires a 200.
func (s *stack) post(t *testing.T, path, body string) {
	t.Helper()
	resp, err := http.Post("http://"+s.apiAddr+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
}

// userRows counts a user's rows in every erased Postgres table.
func (s *stack) userRows(t *testing.T, user string) int {
	t.Helper()
	n := 0
	for _, table := range append(kinds.ErasedTables(), readby.MoveLogTable) {
		var c int
		require.NoError(t, s.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE user_id = $1`, user).Scan(&c))
		n += c
	}
	return n
}

// cursorRows counts a user's rows in read_receipts (the other tables, e.g.
// the cursor-move log, hold a number of rows that depends on their rules).
func (s *stack) cursorRows(t *testing.T, user string) int {
	t.Helper()
	var c int
	require.NoError(t, s.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM read_receipts WHERE user_id = $1`, user).Scan(&c))
	return c
}

// redisTraces counts a user's cursors, registers and mentioned channels in
// Redis.
func (s *stack) redisTraces(t *testing.T, user string) int {
	t.Helper()
	ctx := context.Background()
	states, _, err := cursors.NewStore(s.rstore).Get(ctx, user, nil)
	require.NoError(t, err)
	regs, _, err := members.NewStore(nil, s.rstore).Memberships(ctx, user, nil)
	require.NoError(t, err)
	ms, _, err := mentions.NewStore(nil, s.rstore).UserRedis(ctx, user)
	require.NoError(t, err)
	return len(states) + len(regs) + len(ms)
}

// waitQuiet waits for the persister's consumer lag to reach 0.
func (s *stack) waitQuiet(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		lag, err := s.lag(context.Background())
		return err == nil && lag == 0
	}, 60*time.Second, 100*time.Millisecond, "the persister never caught up")
}

// An erased user is gone from Redis and every Postgres table, whatever was
// in flight when the erasure came (marks produced but not persisted, a
// dead letter), stays gone after the topic is replayed from offset 0, and
// can come back with new marks; another user is untouched throughout.
func TestErasureEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := context.Background()

	// Marks of both users, and joins and mentions, persisted.
	for _, u := range []string{"erin", "olga"} {
		s.post(t, "/v1/receipts:mark", `{"receipts":[
			{"user_id":"`+u+`","channel_id":"c1","kind":"READ","seq":5},
			{"user_id":"`+u+`","channel_id":"c2","kind":"DELIVERED","seq":9}]}`)
	}
	s.waitQuiet(t)
	require.Equal(t, 2, s.cursorRows(t, "erin"))

	// In flight: marks produced while the persister is down.
	s.persister.stop()
	s.post(t, "/v1/receipts:mark", `{"receipts":[
		{"user_id":"erin","channel_id":"c3","kind":"READ","seq":7},
		{"user_id":"olga","channel_id":"c3","kind":"READ","seq":7}]}`)
	preErasure := time.Now().UnixMilli() - 10_000

	out, err := exec.Command(filepath.Join(binDir, "receiptsctl"), "erase", "--target", "http://"+s.apiAddr, "--user", "erin", "--auth-token", serverToken).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "erased erin: generation ")
	require.Zero(t, s.redisTraces(t, "erin"), "Redis is clean when the erasure is acknowledged")

	// A dead letter of the user from before the erasure.
	st := receipt.State{Key: receipt.Key{User: "erin", Channel: "c4"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}}, UpdatedAtUnixMs: preErasure}
	st, _ = receipt.Merge(receipt.State{}, st)
	rec, err := event.Encode(st)
	require.NoError(t, err)
	rec.Topic = s.dltTopic
	require.NoError(t, s.kcl.ProduceSync(ctx, rec).FirstErr())

	s.persister.start(t)
	s.waitReady(s.persister)
	s.waitQuiet(t)
	require.Eventually(t, func() bool {
		tomb, err := s.store.Tombstone(ctx, "erin")
		return err == nil && !tomb.IsZero()
	}, 30*time.Second, 100*time.Millisecond)
	// Two sweeps (every 2s) and the dead letter have had their chance.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		require.Zero(t, s.userRows(t, "erin"), "erased user's rows in Postgres")
		require.Zero(t, s.redisTraces(t, "erin"), "erased user's state in Redis")
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, 3, s.cursorRows(t, "olga"), "another user is untouched")

	// Replay the whole topic from offset 0.
	rewindPersister(t, s)
	s.waitQuiet(t)
	require.Zero(t, s.userRows(t, "erin"), "a replay does not resurrect the user")
	require.Equal(t, 3, s.cursorRows(t, "olga"))

	// The user comes back.
	s.post(t, "/v1/users/erin/channels/c1/read", `{"seq": 2}`)
	s.waitQuiet(t)
	require.Eventually(t, func() bool {
		rows, err := cursors.NewPostgres(s.store).Get(ctx, "erin", nil)
		return err == nil && len(rows) == 1 && rows[0].Read.Position.Seq == 2
	}, 30*time.Second, 100*time.Millisecond, "the new mark reaches Postgres")
	states, _, err := cursors.NewStore(s.rstore).Get(ctx, "erin", nil)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, int64(2), states[0].Read.Position.Seq, "and Redis: "+strconv.Itoa(len(states)))
}
