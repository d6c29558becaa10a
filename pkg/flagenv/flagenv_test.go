package flagenv_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/flagenv"
)

func newSet() (*flag.FlagSet, *string, *time.Duration, *flagenv.List) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("pg-url", "default-url", "postgres")
	d := fs.Duration("drain-timeout", time.Second, "drain")
	brokers := &flagenv.List{"127.0.0.1:9092"}
	fs.Var(brokers, "brokers", "seeds")
	return fs, url, d, brokers
}

func TestEnvFillsFlagsAndFlagsWin(t *testing.T) {
	t.Setenv("RECEIPTS_PG_URL", "from-env")
	t.Setenv("RECEIPTS_DRAIN_TIMEOUT", "5s")
	t.Setenv("RECEIPTS_BROKERS", "a:1, b:2")
	fs, url, d, brokers := newSet()
	require.NoError(t, flagenv.Parse(fs, []string{"--drain-timeout", "7s"}))
	require.Equal(t, "from-env", *url)
	require.Equal(t, 7*time.Second, *d, "the command line wins over the environment")
	require.Equal(t, flagenv.List{"a:1", "b:2"}, *brokers)
	require.Equal(t, "RECEIPTS_DRAIN_TIMEOUT", flagenv.EnvName("drain-timeout"))
}

func TestBadInputIsNamed(t *testing.T) {
	t.Setenv("RECEIPTS_DRAIN_TIMEOUT", "soon")
	fs, _, _, _ := newSet()
	err := flagenv.Parse(fs, nil)
	require.ErrorContains(t, err, "RECEIPTS_DRAIN_TIMEOUT")

	fs, _, _, _ = newSet()
	require.ErrorContains(t, flagenv.Parse(fs, []string{"stray"}), `unexpected arguments ["stray"]`)

	fs, _, _, _ = newSet()
	require.ErrorIs(t, flagenv.Parse(fs, []string{"--help"}), flag.ErrHelp)
}
