package cursors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CmdLog is a go-redis hook for tests: it records each command's name and
// error, and counts round trips (a command or a pipeline each). Exported
// so that the package's external tests use it too.
type CmdLog struct {
	mu    sync.Mutex
	cmds  []string
	trips int64
}

func (l *CmdLog) record(cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trips++
	for _, c := range cmds {
		s := strings.ToLower(c.Name())
		if c.Name() == "script" && len(c.Args()) > 1 {
			s += " " + strings.ToLower(fmt.Sprint(c.Args()[1]))
		}
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			s += " -> " + strings.SplitN(err.Error(), " ", 2)[0]
		}
		l.cmds = append(l.cmds, s)
	}
}

// Reset returns the commands recorded since the last Reset and forgets them.
func (l *CmdLog) Reset() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.cmds
	l.cmds = nil
	return out
}

// Trips is the round trips made since the hook was added.
func (l *CmdLog) Trips() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trips
}

func (*CmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *CmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		l.record(cmd)
		return err
	}
}

func (l *CmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		l.record(cmds...)
		return err
	}
}
