package gate_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// snapshots collects the snapshot events of a watch stream.
type snapshots struct {
	mu    sync.Mutex
	evs   []*receiptsv1.WatchEvent
	token string
}

func (s *snapshots) add(ev *receiptsv1.WatchEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = ev.GetResumeToken()
	if len(ev.GetSnapshot()) > 0 {
		s.evs = append(s.evs, ev)
	}
}

func (s *snapshots) last() (*receiptsv1.WatchEvent, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.evs) == 0 {
		return nil, s.token
	}
	return s.evs[len(s.evs)-1], s.token
}

// TestWatchSnapshotCarriesWatermarks: a watcher whose token is too old
// gets "expired + snapshot", and the snapshot lets a sender repaint every
// tick: the channel head, delivered_to_all_up_to and read_by_all_up_to as
// GetTicks computes them (the sender's own message read by the sender, a
// user hiding reads skipped), the member count, and the members' public
// cursors (never a hidden read).
func TestWatchSnapshotCarriesWatermarks(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	for _, u := range []string{"s", "a", "b", "h"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPut, "/v1/users/h/settings", `{"share_read_receipts": false}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	for seq := range int64(5) {
		status, body = tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": `+strconv.FormatInt(seq+1, 10)+`, "message_id": "m`+strconv.FormatInt(seq+1, 10)+`", "sender_id": "s"}`)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(
		`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 4}`,
		`{"user_id": "b", "channel_id": "g", "kind": "READ", "seq": 2}`,
		`{"user_id": "b", "channel_id": "g", "kind": "DELIVERED", "seq": 5}`,
		`{"user_id": "h", "channel_id": "g", "kind": "READ", "seq": 5}`,
	), &mr)

	// A first watcher: its opening snapshot already carries the ticks.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	firstCtx, firstCancel := context.WithCancel(ctx)
	var first snapshots
	firstDone := watchSSEEvents(t, firstCtx, tb.h1, base, []string{"g"}, "", first.add)
	require.Eventually(t, func() bool { ev, _ := first.last(); return ev != nil }, 10*time.Second, 10*time.Millisecond)
	ev, token := first.last()
	requireTicks := func(ev *receiptsv1.WatchEvent, head, delivered, read int64) {
		t.Helper()
		require.Len(t, ev.GetSnapshot(), 1)
		snap := ev.GetSnapshot()[0]
		var ticks receiptsv1.ChannelTicks
		tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
		require.Equal(t, "g", snap.GetChannelId())
		require.Equal(t, head, snap.GetHead().GetSeq(), "the head")
		require.Equal(t, delivered, snap.GetDeliveredToAllUpTo(), "delivered_to_all_up_to")
		require.Equal(t, read, snap.GetReadByAllUpTo(), "read_by_all_up_to")
		require.Equal(t, int64(4), snap.GetMemberCount())
		require.True(t, snap.GetDetailed())
		for _, f := range []func(*receiptsv1.ChannelTicks) int64{
			func(c *receiptsv1.ChannelTicks) int64 { return c.GetHead().GetSeq() },
			(*receiptsv1.ChannelTicks).GetDeliveredToAllUpTo, (*receiptsv1.ChannelTicks).GetReadByAllUpTo, (*receiptsv1.ChannelTicks).GetMemberCount,
		} {
			require.Equal(t, f(&ticks), f(snap), "as GetTicks answers")
		}
		for _, m := range snap.GetMembers() {
			if m.GetUserId() == "h" {
				require.Nil(t, m.GetRead(), "a hidden read is not in the snapshot")
			}
		}
	}
	requireTicks(ev, 5, 4, 2)
	firstCancel()
	require.Error(t, <-firstDone, "the client went away")

	// More reads, and the stream is trimmed past the watcher's token.
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(
		`{"user_id": "b", "channel_id": "g", "kind": "READ", "seq": 5}`,
		`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 5}`,
	), &mr)
	bg := context.Background()
	require.NoError(t, tb.rdb.XTrimMaxLen(bg, tb.prefix+"cv:{g}:s", 0).Err())

	var again snapshots
	done := watchSSEEvents(t, ctx, tb.h1, base, []string{"g"}, token, again.add)
	require.Eventually(t, func() bool { ev, _ := again.last(); return ev != nil }, 10*time.Second, 10*time.Millisecond)
	ev, _ = again.last()
	require.True(t, ev.GetResumeTokenExpired(), "the token was too old")
	requireTicks(ev, 5, 5, 5)
	cancel()
	require.Error(t, <-done)
}

// TestWatchSeesRemovals: a member who leaves, one who stops sharing reads
// and one who is erased leave the channel view, and a live watcher is told
// (a removal update per cursor it showed), so it stops showing them; a
// member who stays is untouched.
func TestWatchSeesRemovals(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	users := []string{"stay", "leaver", "shy", "gone"}
	for _, u := range users {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/r/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/channels/r/messages", `{"seq": 2, "message_id": "m2", "sender_id": "stay"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	state := map[string]int64{}
	removed := map[string]bool{}
	done := watchSSEEvents(t, ctx, tb.h1, base, []string{"r"}, "", func(ev *receiptsv1.WatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range ev.GetSnapshot() {
			for _, m := range s.GetMembers() {
				if m.GetRead() != nil {
					state[m.GetUserId()+"/READ"] = m.GetRead().GetSeq()
				}
				if m.GetDelivered() != nil {
					state[m.GetUserId()+"/DELIVERED"] = m.GetDelivered().GetSeq()
				}
			}
		}
		for _, u := range ev.GetUpdates() {
			k := u.GetUserId() + "/" + u.GetKind().String()
			if u.GetRemoved() {
				delete(state, k)
				removed[k] = true
				continue
			}
			state[k] = max(state[k], u.GetPosition().GetSeq())
		}
	})
	shows := func(want map[string]int64) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			if len(state) != len(want) {
				return false
			}
			for k, v := range want {
				if state[k] != v {
					return false
				}
			}
			return true
		}
	}
	for _, u := range users[1:] {
		status, body := tb.do(t, http.MethodPost, "/v1/users/"+u+"/channels/r/read", `{"seq": 2}`)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	want := map[string]int64{"stay/READ": 2, "stay/DELIVERED": 2}
	for _, u := range users[1:] {
		want[u+"/READ"], want[u+"/DELIVERED"] = 2, 2
	}
	require.Eventually(t, shows(want), 20*time.Second, 10*time.Millisecond, "every read shown")

	status, body = tb.do(t, http.MethodDelete, "/v1/channels/r/members/leaver", "")
	require.Equal(t, http.StatusOK, status, "leave: %s", body)
	delete(want, "leaver/READ")
	delete(want, "leaver/DELIVERED")
	require.Eventually(t, shows(want), 20*time.Second, 10*time.Millisecond, "the leaver is removed")

	status, body = tb.do(t, http.MethodPut, "/v1/users/shy/settings", `{"share_read_receipts": false}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	delete(want, "shy/READ")
	require.Eventually(t, shows(want), 20*time.Second, 10*time.Millisecond, "the hidden read is removed, the delivery stays")

	status, body = tb.do(t, http.MethodDelete, "/v1/users/gone", "")
	require.Equal(t, http.StatusOK, status, "erase: %s", body)
	delete(want, "gone/READ")
	delete(want, "gone/DELIVERED")
	require.Eventually(t, shows(want), 20*time.Second, 10*time.Millisecond, "the erased user is removed")
	mu.Lock()
	for _, k := range []string{"leaver/READ", "leaver/DELIVERED", "shy/READ", "gone/READ", "gone/DELIVERED"} {
		require.True(t, removed[k], "a removal update for %s", k)
	}
	require.False(t, removed["stay/READ"] || removed["shy/DELIVERED"], "nothing else is removed")
	mu.Unlock()
	cancel()
	require.Error(t, <-done)
}
