package drainbench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

func state(user string, seq int64) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m"}
	return receipt.State{Key: receipt.Key{User: user, Channel: "c"}, Read: c, Delivered: c, DeviceID: "d", UpdatedAtUnixMs: 5}
}

// TestVerifyFindsPlantedFaults: the checker that fails a run must see each
// kind of fault.
func TestVerifyFindsPlantedFaults(t *testing.T) {
	t.Parallel()
	finals := []Final{{State: state("a", 3)}, {State: state("b", 4)}, {State: state("c", 5)}}
	rows := []receipt.State{state("c", 5), state("a", 3), state("b", 4)}
	v := Verify(finals, rows)
	require.True(t, v.OK(), v.String())
	require.Equal(t, 3, v.Rows)

	behind := []receipt.State{state("a", 3), state("b", 3), state("c", 5)}
	v = Verify(finals, behind)
	require.False(t, v.OK())
	require.Equal(t, 1, v.Different)
	require.Contains(t, v.Examples[0], "b:c")

	wrongDevice := state("a", 3)
	wrongDevice.DeviceID = "other"
	wrongTime := state("b", 4)
	wrongTime.UpdatedAtUnixMs++
	wrongMessage := state("c", 5)
	wrongMessage.Read.MessageID = "m5"
	v = Verify(finals, []receipt.State{wrongDevice, wrongTime, wrongMessage})
	require.Equal(t, 3, v.Different, v.String())

	v = Verify(finals, []receipt.State{state("a", 3), state("zz", 1)})
	require.Equal(t, 1, v.Extra)
	require.Equal(t, 2, v.Missing)
	require.False(t, v.OK())
	require.Len(t, v.Examples, 3)
}
