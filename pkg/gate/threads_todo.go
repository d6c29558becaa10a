package gate

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// Placeholders while the thread routes are built: every thread call is
// refused as unimplemented.
var errThreadsNotYet = connect.NewError(connect.CodeUnimplemented, errors.New("threads are not served by this build"))

func (g *Gate) NotifyThreadReply(context.Context, *connect.Request[receiptsv1.NotifyThreadReplyRequest]) (*connect.Response[receiptsv1.NotifyThreadReplyResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) MarkThreadRead(context.Context, *connect.Request[receiptsv1.MarkThreadReadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) MarkThreadUnread(context.Context, *connect.Request[receiptsv1.MarkThreadUnreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) FollowThread(context.Context, *connect.Request[receiptsv1.FollowThreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) UnfollowThread(context.Context, *connect.Request[receiptsv1.FollowThreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) ListThreads(context.Context, *connect.Request[receiptsv1.ListThreadsRequest]) (*connect.Response[receiptsv1.ListThreadsResponse], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) GetThreadMessageReceipts(context.Context, *connect.Request[receiptsv1.GetThreadMessageReceiptsRequest]) (*connect.Response[receiptsv1.MessageReceipts], error) {
	return nil, errThreadsNotYet
}
func (g *Gate) GetThreadTicks(context.Context, *connect.Request[receiptsv1.GetThreadTicksRequest]) (*connect.Response[receiptsv1.ChannelTicks], error) {
	return nil, errThreadsNotYet
}
