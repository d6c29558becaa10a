package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/client"
	"github.com/readstate/receipts/pkg/gatetest"
)

// Example marks a message read, reads where the mark is durable, and
// lists the channel's members. The gateway runs in-process on the test
// backends; against a deployed one, pass its URL and token.
func Example() {
	url, token, stop := exampleGateway()
	defer stop()

	c, err := client.New(url, nil, client.Config{Token: token})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, user := range []string{"alice", "bob"} {
		if _, err := c.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{ChannelId: "general", UserId: user})); err != nil {
			panic(err)
		}
	}
	// The chat server tells about each message; a mark beyond the last
	// one it told about is HEAD_BEHIND, which the client retries.
	if _, err := c.NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{
		ChannelId: "general", Seq: 42, MessageId: "m42", SenderId: "bob",
	})); err != nil {
		panic(err)
	}
	res, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general", Seq: 42}))
	switch {
	case client.Reason(err) == "NOT_A_MEMBER":
		fmt.Println("alice is not in the channel")
	case err != nil:
		panic(err)
	default:
		r := res.Msg.GetResult()
		fmt.Println("durable in:", r.GetDurability(), "real-time view degraded:", r.GetRealtimeDegraded())
	}
	var members []string
	for m, err := range c.ChannelMembers(ctx, "general", 100) {
		if err != nil {
			panic(err)
		}
		members = append(members, m)
	}
	slices.Sort(members)
	fmt.Println("members:", members)
	// Output:
	// durable in: KAFKA real-time view degraded: false
	// members: [alice bob]
}

// exampleGateway starts a gateway with a token for Example, which has no
// *testing.T: failures panic, and stop runs the cleanups.
func exampleGateway() (url, token string, stop func()) {
	tb := &exampleTB{}
	dir, err := os.MkdirTemp("", "client-example")
	if err != nil {
		panic(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	token = "example-token-0123456789"
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte("example:"+token+"\n"), 0o600); err != nil {
		panic(err)
	}
	st := gatetest.Start(tb, gatetest.Options{NoWatch: true, Config: func(c *gatetest.Config) { c.Server.Auth.TokenFile = path }})
	return st.URL, token, tb.close
}

// exampleTB is the part of testing.TB the test kits use, for an example:
// the embedded nil TB is never called.
type exampleTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Name() string              { return "Example" }
func (e *exampleTB) Logf(string, ...any)       {}
func (e *exampleTB) Log(...any)                {}
func (e *exampleTB) Failed() bool              { return false }
func (e *exampleTB) Fail()                     { panic("example failed") }
func (e *exampleTB) FailNow()                  { panic("example failed") }
func (e *exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (e *exampleTB) Cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

func (e *exampleTB) close() {
	e.mu.Lock()
	fs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
