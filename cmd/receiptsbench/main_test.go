package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/drainbench"
)

func TestFlags(t *testing.T) {
	cfg := drainbench.DefaultConfig()
	var report string
	fs := newFlagSet(&cfg, &report, io.Discard)
	t.Setenv("RECEIPTS_EVENTS", "5000")
	require.NoError(t, cli.Parse(fs, []string{"--runs", "5", "--seed", "9",
		"--persister-args", "--writers 1", "--persister-args", "--writers 4", "--persister-bin", "/tmp/a"}))
	require.Equal(t, 5, cfg.Runs)
	require.Equal(t, uint64(9), cfg.Data.Seed)
	require.Equal(t, 5000, cfg.Data.Events, "from the environment")
	require.Equal(t, []string{"--writers 1", "--writers 4"}, cfg.PersisterArgs, "repeats replace the default")
	require.Equal(t, []string{"/tmp/a"}, cfg.PersisterBins)
	require.Equal(t, drainbench.DefaultDataConfig().Users, cfg.Data.Users)
}

func TestRunNeedsSubcommand(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Error(t, run(nil, &out, &errOut))
	require.Error(t, run([]string{"gateway"}, &out, &errOut))
	require.Contains(t, errOut.String(), "receiptsbench persister")
	require.NoError(t, run([]string{"persister", "--help"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--persister-bin")
	require.Contains(t, errOut.String(), "RECEIPTS_PERSISTER_ARGS")
}

func TestShellJoin(t *testing.T) {
	require.Equal(t, `persister --runs 3 --persister-args '--writers 4' '' 'it'\''s'`,
		shellJoin([]string{"persister", "--runs", "3", "--persister-args", "--writers 4", "", "it's"}))
}

func TestRunDispatchesTheHarnesses(t *testing.T) {
	for _, cmd := range []string{"http-floor", "notices", "unread-bench", "readby-bench", "movelog-bench"} {
		var out, errOut bytes.Buffer
		require.NoError(t, run([]string{cmd, "--help"}, &out, &errOut), cmd)
		require.ErrorContains(t, run([]string{cmd, "stray"}, &out, &errOut), "unexpected arguments", cmd)
	}
	var out, errOut bytes.Buffer
	require.NoError(t, run([]string{"help"}, &out, &errOut))
	for _, cmd := range []string{"persister", "http-floor", "notices", "unread-bench", "readby-bench", "movelog-bench"} {
		require.Contains(t, out.String(), "receiptsbench "+cmd, "the usage lists %s", cmd)
	}
	require.ErrorContains(t, run([]string{"load"}, &out, &errOut), `unknown command "load"`, "load stays in receiptsctl")
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"4", "50", "1000"}, cli.SplitList(" 4,50,,1000 "))
	require.Nil(t, cli.SplitList(""))
}
