package fullyread

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// randomMarker draws a marker over few refs, seqs, times and message ids
// (of two lengths), so that ties meet at every step of Order.
func randomMarker(r *rand.Rand) any {
	k := receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c:" + strconv.Itoa(r.IntN(2))}
	ids := []string{"", "m", "n", "mm", "$ev:x"}
	return Marker{Ref: Ref{Key: k, Root: r.Int64N(2) * 7}, Seq: 1 + r.Int64N(3),
		UpdatedAtUnixMs: 1 + r.Int64N(2), MessageID: ids[r.IntN(len(ids))]}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and merge.lua and upsert.sql keep what Merge keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, Kind, env, randomMarker)
	kindtest.StoresAgree(t, Kind, env, randomMarker)
}

// Seqs past 2^53 never reach the stores: a marker is bounded where it
// enters (Validate, in the gateway and when a record is decoded), so the
// Lua compares numerals of at most 16 digits; at the bound it still
// orders as Go does.
func TestBounds(t *testing.T) {
	t.Parallel()
	ok := Marker{Ref: Ref{Key: receipt.Key{User: "u", Channel: "c"}}, Seq: receipt.MaxSeq, UpdatedAtUnixMs: receipt.MaxSeq}
	require.NoError(t, ok.Validate())
	for _, bad := range []Marker{
		{Ref: ok.Ref, Seq: 0, UpdatedAtUnixMs: 1},
		{Ref: ok.Ref, Seq: receipt.MaxSeq + 1, UpdatedAtUnixMs: 1},
		{Ref: Ref{Key: ok.Key, Root: -1}, Seq: 1, UpdatedAtUnixMs: 1},
		{Ref: ok.Ref, Seq: 1, UpdatedAtUnixMs: 0},
		{Ref: ok.Ref, Seq: 1, UpdatedAtUnixMs: 1, MessageID: string(make([]byte, receipt.MaxIDLength+1))},
		{Ref: Ref{Key: receipt.Key{User: "", Channel: "c"}}, Seq: 1, UpdatedAtUnixMs: 1},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}

	ctx := context.Background()
	env := kindtest.Env(t)
	s := storeOf(env)
	near := ok
	near.Seq = receipt.MaxSeq - 1
	for _, m := range []Marker{near, ok, near} {
		_, err := s.MergeRedis(ctx, []Marker{m})
		require.NoError(t, err)
	}
	got, _, err := s.ReadRedis(ctx, "u", []Ref{ok.Ref})
	require.NoError(t, err)
	require.Equal(t, ok, got[ok.Ref], "the greater seq at the bound wins in Lua")
}

// A record carries the marker in the kind's own payload: it decodes back
// to the same marker, and a record whose payload does not validate is
// refused with a reason (a dead letter), never stored.
func TestRecord(t *testing.T) {
	t.Parallel()
	m := Marker{Ref: Ref{Key: receipt.Key{User: "alice", Channel: "c:1"}, Root: 9}, Seq: 12, MessageID: "$m12:example.org", UpdatedAtUnixMs: 1700}
	rec, err := kind.Record(Spec, m)
	require.NoError(t, err)
	require.Equal(t, "alice:c%3A1", string(rec.Key))
	require.Equal(t, string(rec.Key), Kind.RecordKeyOf(m.Ref), "the persister finds a row's records by it")
	d, err := kind.DecodeRecord([]kind.Kind{Kind}, rec)
	require.NoError(t, err)
	got, ok := Kind.FromEvent(&d)
	require.True(t, ok)
	require.Equal(t, m, got)

	bad := m
	bad.Seq = receipt.MaxSeq + 1
	rec, err = kind.Record(Spec, bad)
	require.NoError(t, err)
	_, err = kind.DecodeRecord([]kind.Kind{Kind}, rec)
	require.ErrorIs(t, err, event.ErrUndecodable)
	require.ErrorContains(t, err, "seq")
}
