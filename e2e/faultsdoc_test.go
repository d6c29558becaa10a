package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The results section of docs/faults.md lies between these markers; the
// suite writes it (-update-doc), nobody edits it by hand.
const (
	docBegin = "<!-- results: written by go test ./e2e -run TestFaults -update-doc; do not edit -->"
	docEnd   = "<!-- end of results -->"
)

// writeFaultsDoc replaces the results section of docs/faults.md with the
// table of this run, the commit it ran on and how long it took.
func writeFaultsDoc(t *testing.T, table string, took time.Duration) {
	t.Helper()
	path := "../docs/faults.md"
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	require.True(t, i >= 0 && j > i, "docs/faults.md has no results markers")

	commit := gitOut(t, "rev-parse", "--short=12", "HEAD")
	// The doc itself changes with every run; any other change means the
	// table is not from the commit it names.
	if dirty := gitOut(t, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/faults.md"); dirty != "" {
		commit += " with uncommitted changes"
	}
	race := "without"
	if v := os.Getenv(raceEnv); v != "" && v != "0" {
		race = "with"
	}
	var sec strings.Builder
	fmt.Fprintf(&sec, "%s\n\nRun at %s on commit `%s` (%s, %s/%s, %d CPUs; binaries built %s -race): every scenario, %s in all.\n\n%s",
		docBegin, time.Now().UTC().Format("2006-01-02 15:04 UTC"), commit, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), race, took.Round(time.Second), table)
	out := doc[:i] + sec.String() + doc[j:]
	require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
	t.Logf("wrote the results of commit %s into docs/faults.md", commit)
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "git %s", strings.Join(args, " "))
	return strings.TrimSpace(string(out))
}
