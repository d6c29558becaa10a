package markcalls

import (
	"context"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
)

// Marks answers the read and delivered marks (one, or a batch) and the
// read state: validated, checked against the channels' heads and
// membership, merged into Redis and made durable in flushes shared by
// concurrent calls (coalesce.go), each answered exactly as alone.
type Marks struct {
	*seam.Core
	readBy *readbycalls.ReadBy
	// writes groups concurrent calls' marks into shared writes.
	writes *coalescer[*writeJob]
}

// New returns the mark calls on core; readBy shows the public moves to
// the channels' read-by views.
func New(core *seam.Core, readBy *readbycalls.ReadBy) *Marks {
	g := &Marks{Core: core, readBy: readBy}
	g.writes = newWriteCoalescer(g)
	return g
}

// MarkReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Marks) MarkReceipts(ctx context.Context, req *connect.Request[receiptsv1.MarkReceiptsRequest]) (*connect.Response[receiptsv1.MarkReceiptsResponse], error) {
	marks, err := validateBatch(req.Msg, g.Cfg.MaxBatchItems)
	if err != nil {
		return nil, err
	}
	results, err := g.Write(ctx, marks)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.MarkReceiptsResponse{Results: results}), nil
}

// MarkRead implements receiptsv1connect.ReceiptServiceHandler.
func (g *Marks) MarkRead(ctx context.Context, req *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return g.markOne(ctx, req.Msg, receiptsv1.Kind_READ)
}

// MarkDelivered implements receiptsv1connect.ReceiptServiceHandler.
func (g *Marks) MarkDelivered(ctx context.Context, req *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return g.markOne(ctx, req.Msg, receiptsv1.Kind_DELIVERED)
}

func (g *Marks) markOne(ctx context.Context, r *receiptsv1.MarkRequest, kind receiptsv1.Kind) (*connect.Response[receiptsv1.MarkResponse], error) {
	m, err := ValidateMark(MarkInput{
		User: r.GetUserId(), Channel: r.GetChannelId(), Kind: kind, Seq: r.GetSeq(),
		MessageID: r.GetMessageId(), DeviceID: r.GetDeviceId(), Epoch: r.Epoch, Private: r.GetPrivate(),
	})
	if err != nil {
		return nil, err
	}
	results, err := g.Write(ctx, []Mark{m})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.MarkResponse{Result: results[0]}), nil
}

// GetReadState implements receiptsv1connect.ReceiptServiceHandler.
func (g *Marks) GetReadState(ctx context.Context, req *connect.Request[receiptsv1.GetReadStateRequest]) (*connect.Response[receiptsv1.GetReadStateResponse], error) {
	if err := validateRead(req.Msg, g.Cfg.MaxReadChannels); err != nil {
		return nil, err
	}
	page, err := seam.ChannelPage(req.Msg.GetPageSize(), req.Msg.GetPageToken(), len(req.Msg.GetChannelId()) > 0)
	if err != nil {
		return nil, err
	}
	resp, err := g.read(ctx, req.Msg.GetUserId(), req.Msg.GetChannelId(), page)
	if err != nil {
		return nil, err
	}
	for _, add := range g.Parts.ReadState {
		if err := add(ctx, req.Msg.GetUserId(), req.Msg.GetChannelId(), resp.Msg); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
