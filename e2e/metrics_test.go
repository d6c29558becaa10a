package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrapeMetrics reads every service's /metrics, checks the project's
// metric convention on it (every name of ours starts with receipts_ and is
// built from namespace, subsystem and name; gauges never end in _total; it
// passes `promtool check metrics`), checks that every metric the chart's
// alerts and dashboard query is exported by one of them
// (scripts/check-metric-names.sh), and returns the dumps by service.
func (s *stack) scrapeMetrics(t *testing.T) map[string][]byte {
	t.Helper()
	promtool := findPromtool(t)
	dumps := map[string][]byte{}
	var files []string
	for name, addr := range s.admin {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err, name)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err, name)
		require.Equal(t, http.StatusOK, resp.StatusCode, name)
		dumps[name] = body

		parser := expfmt.NewTextParser(promodel.LegacyValidation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		require.NoError(t, err, name)
		ours := 0
		for fname, mf := range families {
			switch {
			case strings.HasPrefix(fname, "go_"), strings.HasPrefix(fname, "process_"), strings.HasPrefix(fname, "promhttp_"):
				continue
			}
			require.True(t, strings.HasPrefix(fname, "receipts_"), "%s exports %s outside the receipts_ namespace", name, fname)
			ours++
			if mf.GetType().String() == "GAUGE" {
				require.False(t, strings.HasSuffix(fname, "_total"), "%s: gauge %s ends in _total", name, fname)
			}
		}
		require.Greater(t, ours, 5, "%s exports too few metrics of its own", name)

		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool check metrics on %s:\n%s", name, out)
		file := filepath.Join(s.dir, name+".metrics")
		require.NoError(t, os.WriteFile(file, body, 0o600))
		files = append(files, file)
	}

	out, err := checkMetricNames(files, "")
	require.NoError(t, err, "a dashboard or alert queries a metric the binaries do not export (helm/receipts/files/metric-names.txt):\n%s", out)
	// The check can fail: a name nobody exports is reported.
	bogus := filepath.Join(s.dir, "bogus-names.txt")
	require.NoError(t, os.WriteFile(bogus, []byte("receipts_kafkagate_requests_total\nreceipts_kafkagate_no_such_metric_total\n"), 0o600))
	out, err = checkMetricNames(files, bogus)
	require.Error(t, err)
	require.Contains(t, out, "receipts_kafkagate_no_such_metric_total")
	return dumps
}

// findPromtool returns the promtool the metrics check runs: $PROMTOOL,
// else the copy scripts/promtool.sh (and scripts/chart-test.sh) unpack into
// .cache/bin, else one on the PATH. Without one the test fails: the check
// never skips itself (make e2e and make test fetch it first).
func findPromtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "promtool")); err == nil {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is required by the metrics check: run scripts/promtool.sh (Debian package prometheus, unpacked into .cache/bin) or set PROMTOOL: %v", err)
	}
	return p
}

// checkMetricNames runs scripts/check-metric-names.sh on the dumps; list,
// when set, replaces the chart's list of names.
func checkMetricNames(dumps []string, list string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "scripts", "check-metric-names.sh")}, dumps...)...)
	cmd.Env = os.Environ()
	if list != "" {
		cmd.Env = append(cmd.Env, "METRIC_NAMES="+list)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
