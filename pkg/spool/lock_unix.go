//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on dir/LOCK so two processes (or two Opens
// in one process) never append to the same segments. The kernel drops the
// lock when the process dies, so a crash never leaves a stale lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening spool lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return f, nil
}

// unlockDir drops the flock before closing: a child forked by another
// goroutine holds a copy of the descriptor until it execs, and the lock
// belongs to the open file, so closing ours alone would keep the directory
// locked for that moment.
func unlockDir(f *os.File) error {
	unlockErr := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	closeErr := f.Close()
	if unlockErr != nil {
		return fmt.Errorf("unlocking spool: %w", unlockErr)
	}
	return closeErr
}
