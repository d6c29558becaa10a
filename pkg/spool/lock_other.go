//go:build !unix

package spool

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir only creates the lock file where flock is unavailable: the
// gateway runs on Linux, and this keeps the package building elsewhere.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening spool lock: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) error { return f.Close() }
