package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
)

// runHTTPFloor serves the HTTP floor of the write routes
// (loadgen.FloorServer) until interrupted: the bound of a gateway on the
// same machine, driven with `receiptsctl load --target` like the gateway.
func runHTTPFloor(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("http-floor", "http-floor [--addr 127.0.0.1:8090]")
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	srv := loadgen.FloorServer(*addr)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "http-floor: serving fixed mark answers on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
