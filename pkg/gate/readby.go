package gate

import (
	"context"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// GetMessageReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetMessageReceipts(context.Context, *connect.Request[receiptsv1.GetMessageReceiptsRequest]) (*connect.Response[receiptsv1.MessageReceipts], error) {
	return unimplemented[receiptsv1.MessageReceipts]()
}

// GetTicks implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetTicks(context.Context, *connect.Request[receiptsv1.GetTicksRequest]) (*connect.Response[receiptsv1.ChannelTicks], error) {
	return unimplemented[receiptsv1.ChannelTicks]()
}

// LookupReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) LookupReceipts(context.Context, *connect.Request[receiptsv1.LookupReceiptsRequest]) (*connect.Response[receiptsv1.LookupReceiptsResponse], error) {
	return unimplemented[receiptsv1.LookupReceiptsResponse]()
}
