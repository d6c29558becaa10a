package gate

import (
	"context"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// WatchChannels implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) WatchChannels(context.Context, *connect.Request[receiptsv1.WatchChannelsRequest], *connect.ServerStream[receiptsv1.WatchEvent]) error {
	return connect.NewError(connect.CodeUnimplemented, errUnimplemented)
}
