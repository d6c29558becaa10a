package kafkaconf_test

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/tlstest"
)

// deliveryTimeout bounds a record's delivery: kgo retries a produce on any
// connection failure until then, refusals included, and fails the record
// with the last error.
const deliveryTimeout = 3 * time.Second

// client builds a client from cfg plus options that make kfake tests quick.
func client(t *testing.T, cfg kafkaconf.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append(cfg.Opts(nil, nil, ""),
		append([]kgo.Opt{
			kgo.MetadataMinAge(50 * time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
			kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.RecordDeliveryTimeout(deliveryTimeout),
		}, opts...)...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// roundTrip produces one record with cfg and consumes it back with cfg.
func roundTrip(t *testing.T, b *kafkatest.Broker, cfg kafkaconf.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := []byte("mark " + kafkatest.Suffix())
	prod := client(t, cfg)
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: b.Topic, Key: []byte("u:c"), Value: value}).FirstErr())

	cons := client(t, cfg, kgo.ConsumeTopics(b.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "the produced record never came back")
		for _, r := range fs.Records() {
			if string(r.Value) == string(value) {
				return
			}
		}
	}
}

// roundTripFails produces with cfg and returns the record's error.
func roundTripFails(t *testing.T, b *kafkatest.Broker, cfg kafkaconf.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*deliveryTimeout)
	defer cancel()
	err := client(t, cfg).ProduceSync(ctx, &kgo.Record{Topic: b.Topic, Value: []byte("x")}).FirstErr()
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the produce hung instead of failing")
	return err
}

func TestSASLRoundTripEachMechanism(t *testing.T) {
	t.Parallel()
	for _, mech := range kafkaconf.SASLMechanisms {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := kafkatest.New(t, kfake.EnableSASL(), kfake.Superuser(mech, "receipts", "s3cret"))
			cfg := kafkaconf.Config{Brokers: b.Seeds, SASL: kafkaconf.SASLConfig{Mechanism: mech, Username: "receipts", Password: "s3cret"}}
			require.NoError(t, cfg.Validate())
			roundTrip(t, b, cfg)

			// kfake only closes the connection on a wrong password (Kafka
			// answers SASL_AUTHENTICATION_FAILED first): either way the
			// record fails with Kafka's error, which is Permanent, not
			// with an EOF that looks like an outage.
			cfg.SASL.Password = "wrong"
			err := roundTripFails(t, b, cfg)
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
			require.Equal(t, errclass.Permanent, kafkaconf.Classify(err), "%v", err)

			cfg.SASL.Username, cfg.SASL.Password = "nobody", "s3cret"
			require.Equal(t, errclass.Permanent, kafkaconf.Classify(roundTripFails(t, b, cfg)))
		})
	}
}

// Without SASL, a broker that requires it refuses us; that is not
// mistaken for an authentication failure of ours (we sent no credentials),
// but it does fail.
func TestSASLRequiredButMissing(t *testing.T) {
	t.Parallel()
	b := kafkatest.New(t, kfake.EnableSASL(), kfake.Superuser(kafkaconf.SASLPlain, "receipts", "s3cret"))
	err := roundTripFails(t, b, kafkaconf.Config{Brokers: b.Seeds})
	require.NotErrorIs(t, err, kerr.SaslAuthenticationFailed)
}

func TestTLSRoundTripAndWrongCA(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	b := kafkatest.New(t, kfake.TLS(pki.ServerConfig(false)))

	cfg := kafkaconf.Config{Brokers: b.Seeds, TLS: kafkaconf.TLSConfig{Enabled: true, CAFile: pki.CAFile}}
	require.NoError(t, cfg.Validate())
	roundTrip(t, b, cfg)

	other := tlstest.New(t)
	for _, tc := range []struct {
		name string
		edit func(*kafkaconf.Config)
		want string
	}{
		// The server name is the broker's host (127.0.0.1, in the
		// certificate) unless overridden: a name it lacks fails.
		{"wrong server name", func(c *kafkaconf.Config) { c.TLS.ServerName = "kafka.example.internal" }, "certificate is valid for localhost"},
		{"wrong CA", func(c *kafkaconf.Config) { c.TLS.CAFile = other.CAFile }, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bad := cfg
			tc.edit(&bad)
			err := roundTripFails(t, b, bad)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, errclass.Permanent, kafkaconf.Classify(err), "%v", err)
		})
	}
	t.Run("plaintext", func(t *testing.T) {
		t.Parallel()
		require.Error(t, roundTripFails(t, b, kafkaconf.Config{Brokers: b.Seeds}))
	})
}

func TestMutualTLSAndSCRAM(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	b := kafkatest.New(t, kfake.TLS(pki.ServerConfig(true)),
		kfake.EnableSASL(), kfake.Superuser(kafkaconf.SASLScramSHA512, "receipts", "s3cret"))
	cfg := kafkaconf.Config{
		Brokers: b.Seeds,
		TLS:     kafkaconf.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile},
		SASL:    kafkaconf.SASLConfig{Mechanism: "scram-sha-512", Username: "receipts", Password: "s3cret"},
	}
	require.NoError(t, cfg.Validate())
	roundTrip(t, b, cfg)

	noCert := cfg
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	err := roundTripFails(t, b, noCert)
	require.Equal(t, errclass.Permanent, kafkaconf.Classify(err), "the broker refuses a client without a certificate: %v", err)
}

func TestValidateNamesBadCombinations(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, tc := range []struct {
		name string
		cfg  kafkaconf.Config
		want []string // "" when valid
	}{
		{"nothing", kafkaconf.Config{}, nil},
		{"tls system roots", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true}}, nil},
		{"mutual tls", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}}, nil},
		{"files without tls", kafkaconf.Config{TLS: kafkaconf.TLSConfig{CAFile: pki.CAFile, ServerName: "k"}},
			[]string{"--kafka-tls-ca-file, --kafka-tls-server-name set without --kafka-tls"}},
		{"cert without key", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true, CertFile: pki.ClientCertFile}},
			[]string{"--kafka-tls-cert-file and --kafka-tls-key-file go together"}},
		{"missing ca", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true, CAFile: "/nonexistent/ca.crt"}},
			[]string{"reading --kafka-tls-ca-file", "no such file"}},
		{"ca not pem", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true, CAFile: notPEM}},
			[]string{"holds no PEM certificate"}},
		{"key of another cert", kafkaconf.Config{TLS: kafkaconf.TLSConfig{Enabled: true, CertFile: pki.ClientCertFile, KeyFile: pki.ServerKeyFile}},
			[]string{"loading --kafka-tls-cert-file and --kafka-tls-key-file"}},
		{"unknown mechanism", kafkaconf.Config{SASL: kafkaconf.SASLConfig{Mechanism: "GSSAPI", Username: "u", Password: "p"}},
			[]string{`--kafka-sasl-mechanism "GSSAPI": want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`}},
		{"mechanism without credentials", kafkaconf.Config{SASL: kafkaconf.SASLConfig{Mechanism: "SCRAM-SHA-256"}},
			[]string{"needs --kafka-sasl-username", "needs --kafka-sasl-password"}},
		{"credentials without mechanism", kafkaconf.Config{SASL: kafkaconf.SASLConfig{Username: "u", Password: "p"}},
			[]string{"set without --kafka-sasl-mechanism"}},
	} {
		err := tc.cfg.Validate()
		if tc.want == nil {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, kafkaconf.ErrConfig, tc.name)
		require.Equal(t, errclass.Permanent, kafkaconf.Classify(err), tc.name)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, tc.name)
		}
	}
}

// A client built from an invalid config (Opts cannot fail) fails every
// connection with the reason, Permanent, instead of dialling without TLS.
func TestOptsOfInvalidConfigFailEveryDial(t *testing.T) {
	t.Parallel()
	b := kafkatest.New(t)
	err := roundTripFails(t, b, kafkaconf.Config{Brokers: b.Seeds, TLS: kafkaconf.TLSConfig{Enabled: true, CAFile: "/nonexistent/ca.crt"}})
	require.ErrorIs(t, err, kafkaconf.ErrConfig)
	require.Equal(t, errclass.Permanent, kafkaconf.Classify(err))
}

// The flags: every one registered, the mechanism normalised, the password
// never shown, and the flag set's validator is Config.Validate.
func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	var cfg kafkaconf.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	for _, name := range []string{"brokers", "client-id", "kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file",
		"kafka-tls-key-file", "kafka-tls-server-name", "kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password"} {
		require.NotNil(t, fs.Lookup(name), name)
	}
	require.NoError(t, fs.Parse([]string{"--kafka-tls", "--kafka-sasl-mechanism", "scram-sha-256",
		"--kafka-sasl-username", "u", "--kafka-sasl-password", "hunter2"}))
	require.True(t, cfg.TLS.Enabled)
	require.Equal(t, kafkaconf.SASLScramSHA256, cfg.SASL.Mechanism)
	require.Equal(t, "hunter2", cfg.SASL.Password)
	require.False(t, strings.Contains(fs.Lookup("kafka-sasl-password").Value.String(), "hunter2"))

	v, ok := fs.Lookup("kafka-sasl-mechanism").Value.(interface{ Validate() error })
	require.True(t, ok, "the mechanism flag validates the config")
	require.NoError(t, v.Validate())
	cfg.SASL.Username = ""
	require.ErrorContains(t, v.Validate(), "needs --kafka-sasl-username")
}

// tls.Config is used by value in kfake; make sure the helper's client
// config is what the tests think (a guard against a silently plaintext
// "TLS" broker).
func TestTLSBrokerRefusesPlaintextHandshake(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	b := kafkatest.New(t, kfake.TLS(pki.ServerConfig(false)))
	conn, err := tls.Dial("tcp", b.Seeds[0], &tls.Config{RootCAs: pki.CAPool, MinVersion: tls.VersionTLS12})
	require.NoError(t, err, "the broker speaks TLS")
	require.NoError(t, conn.Close())
	_, err = tls.Dial("tcp", b.Seeds[0], &tls.Config{MinVersion: tls.VersionTLS12})
	require.Error(t, err, "and is not trusted by the system roots")
	require.False(t, errors.Is(err, kafkaconf.ErrConfig))
}
