package drainbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/internal/bench/benchpg"
	"github.com/readstate/receipts/pkg/pgtest"
)

// TestRunSmoke runs the whole harness on a tiny data set against the real
// binaries (built here), the local Postgres and a devbroker process: one
// round, its baselines, the checks and the outputs.
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/devbroker", "./cmd/persister")
	build.Dir = filepath.Join("..", "..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cfg := DefaultConfig()
	cfg.Data.Events, cfg.Data.Users, cfg.Data.Channels = 5_000, 500, 5
	cfg.Runs = 1
	cfg.Partitions = 8
	cfg.PersisterBins = []string{filepath.Join(bin, "persister")}
	cfg.DevbrokerBin = filepath.Join(bin, "devbroker")
	cfg.PGURL = pgtest.URL()
	cfg.PGDatabase = fmt.Sprintf("receipts_bench_smoke_%d", os.Getpid())
	cfg.NaiveEvents, cfg.NaiveConns = 500, 4
	cfg.DrainTimeout = time.Minute
	cfg.OutDir = t.TempDir()
	t.Cleanup(func() { dropDatabase(t, cfg.PGURL, cfg.PGDatabase) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Empty(t, res.Failures)
	keys := res.Dataset.DistinctKeys
	require.Positive(t, keys)

	require.Len(t, res.Drains, 1)
	d := res.Drains[0]
	require.True(t, d.Verify.OK(), d.Verify.String())
	require.Equal(t, keys, d.Verify.Rows)
	require.Positive(t, d.EventsPerSec)
	require.Equal(t, int64(keys), d.Table.Inserted, "each key inserted once")
	require.Equal(t, int64(0), d.Table.Deleted)
	require.GreaterOrEqual(t, d.RowsPerEvent, float64(keys)/float64(res.Dataset.Events))
	require.LessOrEqual(t, d.RowsPerEvent, float64(res.Dataset.Advancing)/float64(res.Dataset.Events),
		"never more writes than advancing events")
	require.Positive(t, d.WALBytes)
	require.Positive(t, d.CPU.Persister)
	require.Positive(t, d.CPU.Machine)
	require.GreaterOrEqual(t, d.OffsetsDoneSeconds, d.FirstCommitSeconds)
	require.Equal(t, float64(res.Dataset.Events), d.Metrics["receipts_persister_records_consumed_total"])
	require.Positive(t, d.ActivitySamples)

	require.Len(t, res.Baselines, 1)
	b := res.Baselines[0]
	require.Len(t, b.Copy, 4)
	for _, c := range b.Copy {
		require.Equal(t, keys, c.Rows)
		require.Positive(t, c.RowsPerSec)
	}
	require.NotNil(t, b.Naive)
	require.True(t, b.Naive.Verify.OK(), b.Naive.Verify.String())
	require.Equal(t, 500, b.Naive.Events)

	for _, f := range []string{"result.json", "summary.md", "round1-A/persister.log", "round1-A/metrics.txt", "round1-A/devbroker.log"} {
		require.FileExists(t, filepath.Join(res.Dir, f))
	}
	require.NotEmpty(t, res.Summary.Variants)
}

func dropDatabase(t *testing.T, serverURL, db string) {
	s, err := benchpg.NewServer(serverURL, db)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.AdminConnect(ctx)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{db}.Sanitize()+` WITH (FORCE)`)
	require.NoError(t, err)
}
