package gate

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// The channel, membership and unread RPCs of the contract are being built
// (issue 8); until then they answer Unimplemented, as connect's generated
// default would.
var errNotYet = errors.New("not implemented yet")

func notYet[T any]() (*connect.Response[T], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// NotifyMessage implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) NotifyMessage(context.Context, *connect.Request[receiptsv1.NotifyMessageRequest]) (*connect.Response[receiptsv1.NotifyMessageResponse], error) {
	return notYet[receiptsv1.NotifyMessageResponse]()
}

// NotifyMessages implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) NotifyMessages(context.Context, *connect.Request[receiptsv1.NotifyMessagesRequest]) (*connect.Response[receiptsv1.NotifyMessagesResponse], error) {
	return notYet[receiptsv1.NotifyMessagesResponse]()
}

// JoinChannel implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) JoinChannel(context.Context, *connect.Request[receiptsv1.JoinChannelRequest]) (*connect.Response[receiptsv1.MembershipResponse], error) {
	return notYet[receiptsv1.MembershipResponse]()
}

// LeaveChannel implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) LeaveChannel(context.Context, *connect.Request[receiptsv1.LeaveChannelRequest]) (*connect.Response[receiptsv1.MembershipResponse], error) {
	return notYet[receiptsv1.MembershipResponse]()
}

// GetChannel implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetChannel(context.Context, *connect.Request[receiptsv1.GetChannelRequest]) (*connect.Response[receiptsv1.GetChannelResponse], error) {
	return notYet[receiptsv1.GetChannelResponse]()
}

// GetUnread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetUnread(context.Context, *connect.Request[receiptsv1.GetUnreadRequest]) (*connect.Response[receiptsv1.GetUnreadResponse], error) {
	return notYet[receiptsv1.GetUnreadResponse]()
}

// MarkUnread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) MarkUnread(context.Context, *connect.Request[receiptsv1.MarkUnreadRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return notYet[receiptsv1.MarkResponse]()
}

// ReadAll implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) ReadAll(context.Context, *connect.Request[receiptsv1.ReadAllRequest]) (*connect.Response[receiptsv1.ReadAllResponse], error) {
	return notYet[receiptsv1.ReadAllResponse]()
}
