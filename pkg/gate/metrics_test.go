package gate_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
)

// TestStaleMarksCounted: a mark at the stored position counts as a
// duplicate, one behind it as stale, one that advances as neither (seed
// 002's duplicate and out-of-order marks).
func TestStaleMarksCounted(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dup := func() float64 { return tb.metric(t, "receipts_kafkagate_stale_marks_total", "reason", "duplicate") }
	stale := func() float64 { return tb.metric(t, "receipts_kafkagate_stale_marks_total", "reason", "stale") }

	var resp receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", `{"receipts": [
		{"user_id": "dora", "channel_id": "c1", "kind": "READ", "seq": 12},
		{"user_id": "dora", "channel_id": "c2", "kind": "DELIVERED", "seq": 4}
	]}`, &resp)
	require.Zero(t, dup())
	require.Zero(t, stale())

	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", `{"receipts": [
		{"user_id": "dora", "channel_id": "c1", "kind": "READ", "seq": 12},
		{"user_id": "dora", "channel_id": "c1", "kind": "READ", "seq": 5},
		{"user_id": "dora", "channel_id": "c2", "kind": "DELIVERED", "seq": 3},
		{"user_id": "dora", "channel_id": "c2", "kind": "DELIVERED", "seq": 9}
	]}`, &resp)
	require.Equal(t, 1.0, dup(), "seq 12 again is a duplicate")
	require.Equal(t, 2.0, stale(), "seq 5 behind 12 and 3 behind 4 are stale")
}

// TestRequestDurationObserved: every answered call, whatever its protocol
// and result, lands in request_duration_seconds by rpc, with the SLO's
// 0.25 s bucket.
func TestRequestDurationObserved(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	_, err := tb.client(connect.WithGRPC()).MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "erin", ChannelId: "c1", Seq: 1}))
	require.NoError(t, err)
	_, err = tb.client().MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "erin", ChannelId: "", Seq: 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID)
	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/erin/read-state", "", &rs)
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/erin/channels/c1/read", `{"seq": 2}`, &mr) // the fast REST path

	h := histogramOf(t, tb.reg, "receipts_kafkagate_request_duration_seconds", "MarkRead")
	require.Equal(t, uint64(3), h.GetSampleCount())
	require.Equal(t, uint64(1), histogramOf(t, tb.reg, "receipts_kafkagate_request_duration_seconds", "GetReadState").GetSampleCount())
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	require.Contains(t, bounds, 0.25, "the latency SLO's rules query le=\"0.25\"")
}

// histogramOf finds the histogram name{rpc=rpc} in reg.
func histogramOf(t *testing.T, reg prometheus.Gatherer, name, rpc string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rpc" && l.GetValue() == rpc {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no %s{rpc=%q}", name, rpc)
	return nil
}
