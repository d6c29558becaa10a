package gate

import (
	"context"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// UpdateSettings implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) UpdateSettings(context.Context, *connect.Request[receiptsv1.UpdateSettingsRequest]) (*connect.Response[receiptsv1.UserSettings], error) {
	return unimplemented[receiptsv1.UserSettings]()
}

// GetSettings implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetSettings(context.Context, *connect.Request[receiptsv1.GetSettingsRequest]) (*connect.Response[receiptsv1.UserSettings], error) {
	return unimplemented[receiptsv1.UserSettings]()
}
