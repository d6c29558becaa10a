package cli_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/kafkaconf"
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

// A flag value with a Validate method (kafkaconf's mechanism flag) is
// checked once every flag and variable is set: a bad combination that comes
// half from the environment is caught, and the error names the flags.
func TestValidatorsRunAfterTheEnvironment(t *testing.T) {
	t.Setenv("RECEIPTS_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("RECEIPTS_KAFKA_SASL_PASSWORD", "from-a-secret")
	var kc kafkaconf.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kc.RegisterFlags(fs)
	err := cli.Parse(fs, nil)
	require.ErrorContains(t, err, "--kafka-sasl-mechanism SCRAM-SHA-512 needs --kafka-sasl-username")
	require.NotContains(t, err.Error(), "from-a-secret")

	kc = kafkaconf.Config{}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kc.RegisterFlags(fs)
	require.NoError(t, cli.Parse(fs, []string{"--kafka-sasl-username", "receipts"}))
	require.Equal(t, kafkaconf.SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "receipts", Password: "from-a-secret"}, kc.SASL)

	var usage strings.Builder
	fs.SetOutput(&usage)
	cli.PrintDefaults(fs)
	require.Contains(t, usage.String(), "RECEIPTS_KAFKA_SASL_PASSWORD")
	require.NotContains(t, usage.String(), "from-a-secret", "-h never prints the password")
}
