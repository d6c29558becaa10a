package drainbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is a binary the harness runs, its output appended to a log file.
// Stop it on every path (defer c.stop): it is also killed by the kernel if
// the harness dies first (Pdeathsig).
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{}
	err     error // the exit status, once done is closed
}

// startChild starts bin with args, its stdout and stderr appended to
// logPath.
func startChild(name, logPath, bin string, args ...string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// pprof on (fetchProfile): by environment rather than --pprof, so a
	// build from before the flag, which served pprof anyway, starts too.
	cmd.Env = append(os.Environ(), "RECEIPTS_PPROF=true")
	// Its own process group, so a Ctrl-C to the harness reaches the child
	// only through the harness' own shutdown (SIGTERM, then SIGKILL).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has ended, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits up to grace for the child to end, then
// kills it. It returns the exit error of a child that ended on its own
// terms badly (killed by us is not an error); stopping twice is harmless.
func (c *child) stop(grace time.Duration) error {
	if done, err := c.exited(); done {
		return c.exitErr(err)
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return c.exitErr(c.err)
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", c.name, grace)
	}
}

func (c *child) exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s exited: %w (log %s)", c.name, err, c.logPath)
	}
	return nil
}

// runChild runs bin to completion within timeout, logging to logPath.
func runChild(ctx context.Context, name, logPath string, timeout time.Duration, bin string, args ...string) error {
	c, err := startChild(name, logPath, bin, args...)
	if err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("%s: %w (log %s)", name, c.err, logPath)
		}
		return nil
	case <-ctx.Done():
		_ = c.stop(5 * time.Second)
		return ctx.Err()
	case <-t.C:
		_ = c.stop(5 * time.Second)
		return fmt.Errorf("%s did not finish within %s (log %s)", name, timeout, logPath)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// poll calls f every interval until it returns true or an error, or until
// timeout (an error naming what) or ctx ends.
func poll(ctx context.Context, interval, timeout time.Duration, what string, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
