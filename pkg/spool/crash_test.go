package spool_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/readstate/receipts/pkg/spool"
)

const crashChildEnv = "SPOOL_CRASH_CHILD_DIR"

// TestMain lets the crash test run this binary as the appending child, and
// otherwise checks that every goroutine a test starts is joined by its end.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

// crashChild appends from several goroutines until killed, printing every
// acknowledged record ("appender seq") after its Append returns.
func crashChild(dir string) {
	s, err := spool.Open(spool.Config{Dir: dir, SegmentBytes: 2 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for a := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r := spool.Record{Key: fmt.Appendf(nil, "%d", a), Value: fmt.Appendf(nil, "%d", i)}
				if err := s.Append(r); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", a, i)
				_ = out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// A process killed with SIGKILL in the middle of appends loses no record it
// acknowledged, and what it left reopens in per-appender order.
func TestKillNineKeepsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		acked := map[string]int{}
		sc := bufio.NewScanner(stdout)
		for n := 0; sc.Scan(); n++ {
			var a string
			var i int
			_, err := fmt.Sscanf(sc.Text(), "%s %d", &a, &i)
			require.NoError(t, err)
			acked[a] = i
			if n == 300 {
				require.NoError(t, cmd.Process.Kill())
			}
		}
		_ = cmd.Wait()
		require.Len(t, acked, 4, "round %d", round)

		s, err := spool.Open(spool.Config{Dir: dir})
		require.NoError(t, err)
		next := map[string]int{}
		for _, r := range drainAll(t, s) {
			a, i := string(r.Key), 0
			_, err := fmt.Sscanf(string(r.Value), "%d", &i)
			require.NoError(t, err)
			require.Equal(t, next[a], i, "appender %s out of order", a)
			next[a]++
		}
		for a, i := range acked {
			require.Greater(t, next[a], i, "round %d: appender %s acknowledged %d", round, a, i)
		}
		require.NoError(t, s.Close())
	}
}
