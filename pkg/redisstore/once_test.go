package redisstore_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// replyDropper is a proxy in front of Redis that, once armed, closes the
// connection of the next EVALSHA it relays when the reply comes: the
// script ran, its answer is lost (a master killed between the two, a
// reset link).
type replyDropper struct {
	addr  string
	armed atomic.Bool
}

func startReplyDropper(t *testing.T, upstream string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &replyDropper{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			var dropReply atomic.Bool
			wg.Go(func() {
				defer up.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 && bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) && p.armed.CompareAndSwap(true, false) {
						dropReply.Store(true)
					}
					if n > 0 {
						if _, werr := up.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				defer c.Close()
				defer up.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := up.Read(buf)
					if n > 0 && dropReply.Load() {
						return // the reply is dropped with the connection
					}
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	return p
}

// A script queued with EvalShaOnce runs once when its answer is lost:
// the call fails (the caller answers degraded) instead of go-redis
// sending it again, as it does a plain EVALSHA, whose second answer would
// be about a state its first run already changed.
func TestEvalShaOnceIsNotSentAgainWhenItsAnswerIsLost(t *testing.T) {
	ctx := context.Background()
	direct := redistest.Client(t)
	prefix := redistest.Prefix(t, direct)
	p := startReplyDropper(t, direct.Options().Addr)
	opt := *direct.Options() // its database
	opt.Addr = p.addr
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.New(rdb, redisstore.Config{Prefix: prefix})
	incr := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	require.NoError(t, s.Load(ctx, incr))
	require.NoError(t, rdb.Ping(ctx).Err(), "a pooled connection before the fault")

	key := prefix + "runs"
	run := func(queue func(redis.Pipeliner) *redis.Cmd) error {
		p.armed.Store(true)
		var cmd *redis.Cmd
		_, err := s.Exec(ctx, func(pipe redis.Pipeliner) { cmd = queue(pipe) }, incr)
		if err == nil {
			err = cmd.Err()
		}
		return err
	}

	// The fault is real: go-redis sends a plain EVALSHA again.
	require.NoError(t, run(func(pipe redis.Pipeliner) *redis.Cmd { return incr.EvalSha(ctx, pipe, []string{key}) }))
	n, err := direct.Get(ctx, key).Int()
	require.NoError(t, err)
	require.Equal(t, 2, n, "a plain EVALSHA whose answer was lost ran twice")

	err = run(func(pipe redis.Pipeliner) *redis.Cmd { return redisstore.EvalShaOnce(ctx, pipe, incr, []string{key}) })
	require.ErrorIs(t, err, redisstore.ErrUnavailable, "the lost answer is a failure")
	n, err = direct.Get(ctx, key).Int()
	require.NoError(t, err)
	require.Equal(t, 3, n, "EvalShaOnce ran once")

	// With the link whole again it answers as any EVALSHA.
	got, err := func() (int64, error) {
		var cmd *redis.Cmd
		if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) { cmd = redisstore.EvalShaOnce(ctx, pipe, incr, []string{key}) }, incr); err != nil {
			return 0, err
		}
		return cmd.Int64()
	}()
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
}
