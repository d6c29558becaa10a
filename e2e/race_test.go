package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingTB records the errors reported to it.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (*recordingTB) Helper() {}

// A binary that reports a data race fails its test, whether the report is
// in its log (it may have been killed since) or only in its exit status.
func TestRaceReportsFailTheTest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := func(name, script string) *proc {
		return &proc{name: name, path: "/bin/sh", args: []string{"-c", script}, log: filepath.Join(dir, name+".log")}
	}
	// What a -race binary prints and how it exits after a race.
	reported := sh("reported", `echo serving; echo ================== >&2; echo "WARNING: DATA RACE" >&2;
		echo "Write at 0x00c000123456 by goroutine 7:" >&2; echo "  main.main()" >&2; exit 66`)
	status := sh("status", "exit 66")
	clean := sh("clean", "echo WARNING: nothing to see; exit 0")
	failed := sh("failed", "echo failing >&2; exit 1")
	procs := []*proc{reported, status, clean, failed}
	for _, p := range procs {
		p.start(t)
		<-p.done
	}

	require.Contains(t, reported.raceReport(), "Write at 0x00c000123456 by goroutine 7:")
	require.NotContains(t, reported.raceReport(), "serving", "the report starts at the warning")
	require.Contains(t, status.raceReport(), "exit status 66")
	require.Empty(t, clean.raceReport())
	require.Empty(t, failed.raceReport(), "an ordinary failure is no race")

	rec := &recordingTB{TB: t}
	failOnRace(rec, procs...)
	require.Len(t, rec.errs, 2, "%q", rec.errs)
	require.Contains(t, rec.errs[0], "reported: data race")
	require.Contains(t, rec.errs[1], "status: data race")
	rec.errs = nil
	failOnRace(rec, clean, failed)
	require.Empty(t, rec.errs)
}
