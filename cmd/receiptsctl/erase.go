package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
)

// runErase erases users through the gateway's EraseUser, the one path
// that orders an erasure against concurrent marks (the Redis script every
// merge reads) and makes its event durable with the marks' rules; going
// to the stores directly would have to repeat both. It prints each
// user's new generation and where the erasure is durable.
func runErase(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("erase", "erase --user U[,U2...] [flags]")
	users := fs.String("user", "", "the users to erase, comma-separated")
	target := fs.String("target", loadgen.TargetDefault, "kafkagate base URL")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of each erasure call")
	token := fs.String("auth-token", "", "bearer token of a token-file line with the erase scope (name:token:erase); empty: none")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if len(splitList(*users)) == 0 {
		fs.Usage()
		return &exitError{code: 2, msg: "erase: no --user given"}
	}
	client := receiptsv1connect.NewReceiptServiceClient(http.DefaultClient, *target)
	for _, user := range splitList(*users) {
		cctx, cancel := context.WithTimeout(ctx, *timeout)
		req := connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: user})
		if *token != "" {
			req.Header().Set("Authorization", "Bearer "+*token)
		}
		resp, err := client.EraseUser(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("erasing %q through %s: %w", user, *target, err)
		}
		fmt.Fprintf(out, "erased %s: generation %d, gone from Redis and Postgres, durable in %s\n",
			resp.Msg.GetUserId(), resp.Msg.GetGeneration(), resp.Msg.GetDurability())
	}
	return nil
}
