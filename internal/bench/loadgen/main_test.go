package loadgen

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be joined by its end, except
// fasthttp's cleaners: they sleep out their interval (up to 10 s) after
// Run closed the connections, then see none and return.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"))
}
