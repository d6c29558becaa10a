package drainbench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses, as the kernel prints it.
	line := "4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 3412 0 0 0 1234 567 89 10 20 0 1 0 123456 2000000 300 18446744073709551615\n"
	s, err := ParseProcStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, ProcStat{PID: 4242, PPID: 1, Comm: "post gres) (x)", UTime: 1234, STime: 567, CUTime: 89, CSTime: 10}, s)
	require.Equal(t, uint64(1801), s.Ticks())
	require.Equal(t, uint64(99), s.ChildTicks())

	for _, bad := range []string{"", "12 no parens S 1", "12 (c) S 1 2 3", "x (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"} {
		_, err := ParseProcStat([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestReadOwnProcStat(t *testing.T) {
	t.Parallel()
	s, err := ReadProcStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), s.PID)
	require.Equal(t, os.Getppid(), s.PPID)
	procs, err := ProcsByComm(s.Comm)
	require.NoError(t, err)
	require.Contains(t, procs, os.Getpid())
}

func TestParseMachineStat(t *testing.T) {
	t.Parallel()
	text := "cpu  100 5 50 1000 20 3 7 11 40 0\ncpu0 50 2 25 500 10 1 3 5 20 0\nintr 1 2 3\n"
	m, err := ParseMachineStat([]byte(text))
	require.NoError(t, err)
	// Busy = user + nice + system + irq + softirq; guest is inside user.
	require.Equal(t, MachineStat{Busy: 100 + 5 + 50 + 3 + 7, Idle: 1000 + 20, Steal: 11}, m)
	require.Equal(t, uint64(165+1020+11), m.Total())
	later := MachineStat{Busy: 265, Idle: 1120, Steal: 12}
	require.Equal(t, MachineStat{Busy: 100, Idle: 100, Steal: 1}, later.Sub(m))

	_, err = ParseMachineStat([]byte("cpu0 1 2 3 4 5 6 7 8\n"))
	require.Error(t, err, "no aggregate line")
	_, err = ParseMachineStat([]byte("cpu 1 2 3\n"))
	require.Error(t, err, "short line")

	live, err := ReadMachineStat()
	require.NoError(t, err)
	require.Positive(t, live.Total())
	require.Positive(t, ClockTicks())
}
