package loadgen

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be joined by its end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
