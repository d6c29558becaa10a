package cli_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
)

func newSet() (*flag.FlagSet, *string, *time.Duration, *[]string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("pg-url", "default-url", "postgres")
	d := fs.Duration("drain-timeout", time.Second, "drain")
	brokers := &[]string{"127.0.0.1:9092"}
	fs.Func("brokers", "seeds", func(v string) error {
		*brokers = strings.Split(strings.ReplaceAll(v, " ", ""), ",")
		return nil
	})
	return fs, url, d, brokers
}

func TestEnvFillsFlagsAndFlagsWin(t *testing.T) {
	t.Setenv("RECEIPTS_PG_URL", "from-env")
	t.Setenv("RECEIPTS_DRAIN_TIMEOUT", "5s")
	t.Setenv("RECEIPTS_BROKERS", "a:1, b:2")
	fs, url, d, brokers := newSet()
	require.NoError(t, cli.Parse(fs, []string{"--drain-timeout", "7s"}))
	require.Equal(t, "from-env", *url)
	require.Equal(t, 7*time.Second, *d, "the command line wins over the environment")
	require.Equal(t, []string{"a:1", "b:2"}, *brokers)
	require.Equal(t, "RECEIPTS_DRAIN_TIMEOUT", cli.EnvName("drain-timeout"))
}

func TestBadInputIsNamed(t *testing.T) {
	t.Setenv("RECEIPTS_DRAIN_TIMEOUT", "soon")
	fs, _, _, _ := newSet()
	err := cli.Parse(fs, nil)
	require.ErrorContains(t, err, "RECEIPTS_DRAIN_TIMEOUT")

	fs, _, _, _ = newSet()
	require.ErrorContains(t, cli.Parse(fs, []string{"stray"}), `unexpected arguments ["stray"]`)

	fs, _, _, _ = newSet()
	require.ErrorIs(t, cli.Parse(fs, []string{"--help"}), flag.ErrHelp)
}
