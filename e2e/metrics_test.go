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
// passes `promtool check metrics`), and returns the dumps by service.
func (s *stack) scrapeMetrics(t *testing.T) map[string][]byte {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("CI_REQUIRE_PROMTOOL") != "" {
		t.Fatalf("promtool is required here (Debian package prometheus): %v", err)
	}
	dumps := map[string][]byte{}
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

		if promtool != "" {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(body)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "promtool check metrics on %s:\n%s", name, out)
		}
		require.NoError(t, os.WriteFile(filepath.Join(s.dir, name+".metrics"), body, 0o600))
	}
	return dumps
}
