package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// TestHistoryCheckerFindsLoss proves the fault suite's history checker can
// fail: on a stack without the drift sweep, a clean run passes it; then an
// acknowledged write dropped from the spool before its replay, records
// deleted from the topic (kadm DeleteRecords) and a Postgres row moved
// back behind the max-merge's back each make it fail.
func TestHistoryCheckerFindsLoss(t *testing.T) {
	s := newStack(t, stackOptions{spool: true, noSweep: true})
	ctx := context.Background()
	m, h := newModel(), newHistory()
	w := workload{clients: 2, users: 10, channels: 4, batch: 10, dup: 0.2, reorder: 0.15, private: 0.1, epoch: 0.2, retry: true}
	d := startRecordingDriver(s.apiAddr, w, m, h, 7)
	o := startOps(s.apiAddr, d, h, 8)
	waitAcked(t, m, 500, 60*time.Second)
	d.halt()
	o.halt()
	_, v := s.waitConverged(ctx, m.snapshot(), 60*time.Second)
	require.Zero(t, v.lost+v.diverged, v.firstProblem)
	hv, err := s.checkHistory(ctx, h)
	require.NoError(t, err)
	require.Zero(t, hv.missing+hv.lost+hv.regressed, "a clean run: %v", hv.problems)
	require.Positive(t, hv.reads, "the ops clients read through the API")

	// An acknowledged write that only the spool held, dropped before its
	// replay: the broker is down, the mark is answered SPOOLED, the
	// gateway dies and its spool is lost.
	s.broker.kill9()
	k := receipt.Key{User: "u1", Channel: "c1"}
	seq := d.nextSeq(k).Add(100)
	cl := newOpsClient(s.apiAddr, "grpc")
	var spooled bool
	deadline := time.Now().Add(30 * time.Second)
	for !spooled {
		require.True(t, time.Now().Before(deadline), "no mark was answered SPOOLED with the broker down")
		r := markOne(t, cl, k, seq, "spool-victim")
		if r != nil && r.GetDurability().String() == "SPOOLED" {
			h.ack(markWrite(k, "read", seq, nil, "spool-victim", "SPOOLED"))
			spooled = true
			continue
		}
		time.Sleep(200 * time.Millisecond) // poll with a deadline
	}
	s.gate.kill9()
	spoolDir := filepath.Join(s.dir, "spool")
	entries, err := os.ReadDir(spoolDir)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the spool holds the acknowledged mark")
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(spoolDir, e.Name())))
	}
	s.broker.start(t)
	s.waitBroker()
	s.gate.start(t)
	s.waitReady(s.gate)
	waitLagZero(t, s)
	hv, err = s.checkHistory(ctx, h)
	require.NoError(t, err)
	require.Equal(t, 1, hv.missing, "the mark dropped from the spool: %v", hv.problems)

	// Postgres moved back behind the max-merge's back (before any record
	// is deleted: the checker holds Postgres to the records on the topic).
	var victim receipt.Key
	for key, st := range m.snapshot() {
		if st.Read.Position.Seq > 1 {
			victim = key
			break
		}
	}
	require.NotZero(t, victim)
	_, err = s.store.Pool().Exec(ctx, `UPDATE read_receipts SET read_seq = 1, read_epoch = 0, private_read_seq = 0, private_read_epoch = 0 WHERE user_id = $1 AND channel_id = $2`, victim.User, victim.Channel)
	require.NoError(t, err)
	hv, err = s.checkHistory(ctx, h)
	require.NoError(t, err)
	require.Positive(t, hv.lost, "a Postgres row moved back: %v", hv.problems)

	// Records deleted from the topic: a whole partition's.
	adm := kadm.NewClient(s.kcl)
	ends, err := adm.ListEndOffsets(ctx, s.topic)
	require.NoError(t, err)
	del := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if len(del) == 0 && o.Offset > 0 {
			del.Add(kadm.Offset{Topic: s.topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		}
	})
	require.NotEmpty(t, del)
	resp, err := adm.DeleteRecords(ctx, del)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	hv, err = s.checkHistory(ctx, h)
	require.NoError(t, err)
	require.Greater(t, hv.missing, 1, "records deleted from the topic")
}

// markOne sends one read mark and returns its result (nil: the call failed).
func markOne(t *testing.T, c *opsClient, k receipt.Key, seq int64, device string) *receiptsv1.ReceiptResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := apiCall(ctx, c, c.cl.MarkReceipts, &receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{{
		UserId: k.User, ChannelId: k.Channel, Kind: receiptsv1.Kind_READ, Seq: seq, DeviceId: device}}}, "POST", "/v1/receipts:mark", true)
	if err != nil {
		return nil
	}
	return resp.GetResults()[0]
}

// waitLagZero waits until the persister has consumed the whole topic.
func waitLagZero(t *testing.T, s *stack) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag, err := s.lag(context.Background())
		if err == nil && lag == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the persister did not catch up: lag %d, %v", lag, err)
		time.Sleep(200 * time.Millisecond) // poll with a deadline
	}
}

// The read checker counts a read below an earlier one, and a read at an
// epoch no mark-unread explains; not a read that overlapped the earlier
// one.
func TestCheckReadsCountsRegressions(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	t0 := time.Now()
	at := func(ms int, epoch, seq int64) apiRead {
		st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}}}
		start := t0.Add(time.Duration(ms) * time.Millisecond)
		return apiRead{key: k, start: start, end: start.Add(5 * time.Millisecond), state: st}
	}
	h := newHistory()
	h.reads = []apiRead{at(0, 0, 5), at(10, 0, 7), at(20, 0, 7)}
	require.Zero(t, checkReads(h, &historyVerdict{}))
	h.reads = append(h.reads, at(12, 0, 6)) // overlaps the read of 7: either order is fine
	require.Zero(t, checkReads(h, &historyVerdict{}))
	h.reads = append(h.reads, at(30, 0, 6))
	require.Equal(t, 1, checkReads(h, &historyVerdict{}))
	unread := at(40, 0, 7) // mark-unread: the own read forward in (epoch, seq), but no call made it
	unread.state.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 2}}
	h.reads = append(h.reads, unread)
	require.Equal(t, 2, checkReads(h, &historyVerdict{}))
	h.unreads[k] = 1
	require.Equal(t, 1, checkReads(h, &historyVerdict{}))
}
