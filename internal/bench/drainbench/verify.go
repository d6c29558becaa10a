package drainbench

import (
	"fmt"

	"github.com/readstate/receipts/pkg/receipt"
)

// VerifyResult compares a table with the final rows it must hold.
type VerifyResult struct {
	// Rows is how many rows the table holds; Want how many it must.
	Rows int `json:"rows"`
	Want int `json:"want"`
	// Missing keys have no row; Extra rows have no key in the data set;
	// Different rows differ from their final row in any column.
	Missing   int `json:"missing"`
	Extra     int `json:"extra"`
	Different int `json:"different"`
	// Examples names up to maxExamples of the mismatches.
	Examples []string `json:"examples,omitempty"`
}

// OK reports whether the table equals the final rows.
func (v VerifyResult) OK() bool { return v.Missing == 0 && v.Extra == 0 && v.Different == 0 }

func (v VerifyResult) String() string {
	if v.OK() {
		return fmt.Sprintf("all %d rows equal their final value", v.Rows)
	}
	return fmt.Sprintf("%d rows, want %d: %d missing, %d extra, %d different; e.g. %v",
		v.Rows, v.Want, v.Missing, v.Extra, v.Different, v.Examples)
}

const maxExamples = 10

// Verify compares every row with its final value: both cursors (epoch,
// seq, message id), the device id and updated_at (milliseconds).
func Verify(finals []Final, rows []receipt.State) VerifyResult {
	v := VerifyResult{Rows: len(rows), Want: len(finals)}
	want := make(map[receipt.Key]receipt.State, len(finals))
	for _, f := range finals {
		want[f.State.Key] = f.State
	}
	example := func(format string, args ...any) {
		if len(v.Examples) < maxExamples {
			v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
		}
	}
	seen := make(map[receipt.Key]bool, len(rows))
	for _, got := range rows {
		w, ok := want[got.Key]
		if !ok {
			v.Extra++
			example("extra row %s", got.Key.KafkaKey())
			continue
		}
		seen[got.Key] = true
		if got != w {
			v.Different++
			example("%s: got %s, want %s", got.Key.KafkaKey(), describe(got), describe(w))
		}
	}
	for _, f := range finals {
		if !seen[f.State.Key] {
			v.Missing++
			example("missing %s (want %s)", f.State.Key.KafkaKey(), describe(f.State))
		}
	}
	return v
}

func describe(s receipt.State) string {
	return fmt.Sprintf("read %d/%d %q delivered %d/%d %q device %q at %d",
		s.Read.Position.Epoch, s.Read.Position.Seq, s.Read.MessageID,
		s.Delivered.Position.Epoch, s.Delivered.Position.Seq, s.Delivered.MessageID,
		s.DeviceID, s.UpdatedAtUnixMs)
}
