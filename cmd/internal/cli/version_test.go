package cli_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
)

// binaries are every command of cmd/.
var binaries = []string{"kafkagate", "persister", "dlt-reconciler", "receiptsctl", "devbroker", "receiptsbench"}

// TestEveryBinaryPrintsItsVersion builds every binary with the version
// and revision stamped the way the image stamps them (the Dockerfile's
// -ldflags, its VERSION and REVISION build args filled in; the release
// build's are the same flags) and runs NAME --version: each prints "NAME
// VERSION (revision REVISION) GOVERSION" on stdout and exits 0, and the
// services also take it after other flags.
func TestEveryBinaryPrintsItsVersion(t *testing.T) {
	t.Parallel()
	const version, revision = "v9.8.7-versiontest", "0123456789abcdef0123456789abcdef01234567"
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"-ldflags", imageLdflags(t, map[string]string{"VERSION": version, "REVISION": revision}),
		"github.com/readstate/receipts/cmd/...")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	for _, name := range binaries {
		for _, args := range [][]string{{"--version"}, {"-version"}} {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(dir, name), args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "%s %v: %s", name, args, stderr.String())
			line := strings.TrimSpace(stdout.String())
			require.True(t, strings.HasPrefix(line, name+" "+version+" (revision "+revision+") "), "%s %v printed %q", name, args, line)
			require.True(t, strings.HasSuffix(line, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH), "%s: %q", name, line)
			require.Empty(t, stderr.String(), name)
		}
	}
	// A service takes --version among its other flags, and in the migrate
	// form; it starts nothing (no Postgres is named).
	for _, args := range [][]string{{"--log-level", "debug", "--version"}, {"migrate", "--version"}} {
		out, err := exec.Command(filepath.Join(dir, "persister"), args...).Output()
		require.NoError(t, err, "%v", args)
		require.True(t, strings.HasPrefix(string(out), "persister "+version+" "), "%v: %q", args, out)
	}
}

// TestServiceVersionFlag: Service.Parse prints the build to Stdout and
// returns ErrVersionShown, which Main treats as success.
func TestServiceVersionFlag(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	s := cli.Service{Name: "svc", Stdout: &stdout}
	err := s.Parse([]string{"--version"}, io.Discard, func(fs *flag.FlagSet) { fs.String("own", "", "") })
	require.ErrorIs(t, err, cli.ErrVersionShown)
	require.Equal(t, "svc "+cli.Build().String()+"\n", stdout.String())

	stdout.Reset()
	require.NoError(t, s.Parse(nil, io.Discard, nil))
	require.Empty(t, stdout.String(), "no --version, no version")
}

// TestBootRegistryHasBuildInfo: the registry every service's /metrics
// serves (Boot's) has receipts_build_info with this binary's build.
func TestBootRegistryHasBuildInfo(t *testing.T) {
	t.Parallel()
	s := cli.Service{Name: "svc"}
	// Postgres is opened lazily: nothing listens on port 1, and Boot does
	// not need it to.
	b, done, err := s.Boot(context.Background(), []string{"--pg-url", "postgres://nobody@127.0.0.1:1/none", "--log-level", "error"}, io.Discard, nil)
	require.NoError(t, err)
	require.False(t, done)
	defer b.Close()
	bi := cli.Build()
	require.NoError(t, testutil.GatherAndCompare(b.Registry, strings.NewReader(fmt.Sprintf(`
# HELP receipts_build_info Always 1; the labels say which build runs: version, VCS revision and Go version.
# TYPE receipts_build_info gauge
receipts_build_info{goversion=%q,revision=%q,version=%q} 1
`, bi.GoVersion, bi.Revision, bi.Version)), "receipts_build_info"))
}
