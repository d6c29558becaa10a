package redistest

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hung is the address of a Redis that accepts connections and never
// answers (a stopped process, a partition that drops packets): only a
// deadline ends a call to it. It closes when the test ends.
func Hung(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
