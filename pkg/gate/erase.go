package gate

import (
	"context"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// EraseUser implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) EraseUser(context.Context, *connect.Request[receiptsv1.EraseUserRequest]) (*connect.Response[receiptsv1.EraseUserResponse], error) {
	return unimplemented[receiptsv1.EraseUserResponse]()
}
