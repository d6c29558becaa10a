package channelcalls

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tracing"
)

// Member paging of GetChannel.
const (
	PageSizeDefault = 100
	MaxPageSize     = 1000
)

// JoinChannel implements receiptsv1connect.ReceiptServiceHandler.
func (g *Channels) JoinChannel(ctx context.Context, req *connect.Request[receiptsv1.JoinChannelRequest]) (*connect.Response[receiptsv1.MembershipResponse], error) {
	r := req.Msg
	k, err := seam.ValidateKey(r.GetUserId(), r.GetChannelId())
	if err != nil {
		return nil, err
	}
	if r.Seq != nil {
		if err := receipt.ValidateBounded("seq", *r.Seq); err != nil {
			return nil, seam.Invalid(apierr.InvalidSeq, err)
		}
	}
	return g.changeMembership(ctx, k, true, r.Seq)
}

// LeaveChannel implements receiptsv1connect.ReceiptServiceHandler.
func (g *Channels) LeaveChannel(ctx context.Context, req *connect.Request[receiptsv1.LeaveChannelRequest]) (*connect.Response[receiptsv1.MembershipResponse], error) {
	k, err := seam.ValidateKey(req.Msg.GetUserId(), req.Msg.GetChannelId())
	if err != nil {
		return nil, err
	}
	return g.changeMembership(ctx, k, false, nil)
}

// changeMembership joins (from joinSeq, default the head) or leaves. The
// new register's version is the channel head now, then Redis' clock,
// ordered after the register Redis holds (members.Store.ChangeMembership), so
// that a client's join then leave (or leave then join) within one
// millisecond still applies in its order and no gateway's clock decides a
// race; a replayed event keeps its own version and so never undoes a
// newer one. Without Redis the version time is the gateway's clock, above
// the register read. Joining as a member, or leaving as a non-member,
// changes nothing (a retried join must not move the join point to the
// head); the register held is produced again all the same, as marks are
// (the earlier call's produce may have failed).
func (g *Channels) changeMembership(ctx context.Context, k receipt.Key, join bool, joinSeq *int64) (*connect.Response[receiptsv1.MembershipResponse], error) {
	f := g.Lookup(ctx, []receipt.Key{k}, true)
	head, err := g.headOf(ctx, f, k.Channel)
	if err != nil {
		return nil, err
	}
	if joinSeq != nil && head > 0 && *joinSeq > head {
		return nil, seam.BeyondHead("seq", *joinSeq, head)
	}
	now := g.NowMs()
	stored, hasStored := f.UserRegister(k)
	var reg channel.Membership
	switch {
	case hasStored && stored.Member == join && (!join || joinSeq == nil || *joinSeq == stored.JoinSeq):
		reg = stored // nothing to change
	case join:
		reg = channel.Join(k, head, now, head)
		if joinSeq != nil {
			reg.JoinSeq = *joinSeq
		}
	default:
		reg = channel.Leave(k, head, now)
	}
	change := !hasStored || reg != stored
	if hasStored && change && reg.Compare(stored) <= 0 {
		reg.VersionSeq, reg.VersionUnixMs = stored.VersionSeq, stored.VersionUnixMs+1
	}

	// A new join raises the private read to its join point; an unchanged
	// register does not (it would undo a mark-unread made since the join).
	var read *receipt.State
	if reg.Member && reg.JoinSeq > 0 && change {
		st := channel.JoinRead(reg)
		st.UpdatedAtUnixMs = now
		read = &st
	}
	var res members.MembershipResult
	readDegraded := false
	w, err := seam.WriteUser(ctx, g.Core, seam.UserWrite[joined]{
		User: k.User, Encode: joined.encode, Largest: joined{reg, read},
		Change: func(ctx context.Context) (joined, int64, error, error) {
			res = g.writeMembership(ctx, reg, change)
			if change {
				reg = res.Membership // versioned by Redis, once its user's hash took it
			}
			// The generation the Redis writes read: stamped on the event,
			// it orders it against an erasure as those writes are.
			gen := seam.GenerationOf(res.Generation, res.Err)
			if res.Err == nil && !res.Membership.Member {
				g.readBy.LeaveView(ctx, reg.Key) // a member who left is out of read-by and ticks
			}
			if read != nil {
				merged := g.marks.MergeRedis(ctx, []receipt.State{*read})
				resolved, err := g.marks.ResolveEpochs(ctx, []receipt.State{*read}, merged)
				if err != nil {
					return joined{}, 0, nil, err
				}
				g.marks.MergeUnloaded(ctx, merged, resolved)
				readDegraded = merged[0].Err != nil
				if merged[0].Err == nil {
					gen = max(gen, merged[0].Generation) // Unstamped is the least
				}
				read = &resolved[0]
			}
			if res.Err == nil && res.Changed && res.Membership.Member {
				g.readBy.JoinView(ctx, reg.Key) // back in read-by and ticks
			}
			if read == nil && !change && res.Err == nil && reg.Member && reg.JoinSeq > 0 {
				read = g.heldCursors(ctx, k)
			}
			return joined{reg, read}, gen, res.Err, nil
		},
		// Without Redis the register and the read go as computed.
		Degraded: func(v joined, _ error) (joined, error) { return v, nil },
	})
	if err != nil {
		return nil, err
	}
	degraded := w.Degraded || readDegraded
	if read != nil && degraded {
		g.Restore.NoteDegraded([]string{k.User})
	}
	out := &receiptsv1.MembershipResponse{Membership: membershipProto(reg), Durability: w.Durability, RealtimeDegraded: degraded}
	if !degraded {
		out.Membership, out.Changed = membershipProto(res.Membership), res.Changed
	}
	return connect.NewResponse(out), nil
}

// heldCursors is what Redis holds of k's cursors (nil: nothing, or Redis
// failed), produced with an unchanged join: an earlier attempt of the
// same join may have raised them in Redis and failed before its produce,
// and this retry, which changes nothing, is the only one left to make
// them durable. (The join read itself is not merged again: it would undo
// a mark-unread made since the join.)
func (g *Channels) heldCursors(ctx context.Context, k receipt.Key) *receipt.State {
	held, _, err := g.CursorStore().Get(ctx, k.User, []string{k.Channel})
	if err != nil || len(held) == 0 {
		return nil
	}
	return &held[0]
}

// writeMembership writes reg into Redis: a change with the version Redis
// sets (ChangeMembership), an unchanged register as a plain merge.
func (g *Channels) writeMembership(ctx context.Context, reg channel.Membership, change bool) members.MembershipResult {
	if change {
		return g.MemberStore().ChangeMembership(ctx, reg)
	}
	res, err := g.MemberStore().MergeMemberships(ctx, []channel.Membership{reg})
	if err != nil {
		return members.MembershipResult{Membership: reg, Err: err}
	}
	return res[0]
}

// headOf is the channel's head seq: from the facts, or — when Redis could
// not answer — from Postgres (0 when the channel has none).
func (g *Channels) headOf(ctx context.Context, f *seam.Facts, ch string) (int64, error) {
	if f.Known {
		return f.Head(ch), nil
	}
	err := g.Settled(ctx, nil, []string{ch})
	var heads []channel.Head
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		heads, err = g.HeadStore().ReadPG(pctx, []string{ch})
		cancel()
	}
	if err != nil {
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return 0, cerr
		}
		return 0, seam.UnavailableError(fmt.Errorf("reading the head of %s (Redis and Postgres both failed): %w; retry", ch, err))
	}
	if len(heads) == 0 {
		return 0, nil
	}
	return heads[0].Seq, nil
}

func membershipProto(m channel.Membership) *receiptsv1.Membership {
	return &receiptsv1.Membership{ChannelId: m.Key.Channel, UserId: m.Key.User, Member: m.Member,
		VersionSeq: m.VersionSeq, VersionUnixMs: m.VersionUnixMs, JoinSeq: m.JoinSeq}
}

// GetChannel implements receiptsv1connect.ReceiptServiceHandler. The
// members come from Redis when it holds the channel's whole membership
// hash (hydrated from Postgres first when lost, up to MaxHydrateMembers
// registers); a larger channel's, or any while Redis is down, from
// Postgres, which may lag Redis by the persister's delay.
func (g *Channels) GetChannel(ctx context.Context, req *connect.Request[receiptsv1.GetChannelRequest]) (*connect.Response[receiptsv1.GetChannelResponse], error) {
	r := req.Msg
	if err := receipt.ValidateID("channel_id", r.GetChannelId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	size := int(r.GetPageSize())
	switch {
	case size == 0:
		size = PageSizeDefault
	case size < 0 || size > MaxPageSize:
		return nil, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: "page_size", Reason: fmt.Sprintf("must be within [1, %d], got %d", MaxPageSize, size)})
	}
	after, err := seam.DecodePageToken(r.GetPageToken())
	if err != nil {
		return nil, seam.Invalid(apierr.InvalidField, err)
	}
	ch := r.GetChannelId()
	// No user: the facts of the channel alone.
	f := g.Lookup(ctx, []receipt.Key{{Channel: ch}}, false)
	out := &receiptsv1.GetChannelResponse{ChannelId: ch}
	head, err := g.headOf(ctx, f, ch)
	if err != nil {
		return nil, err
	}
	if head > 0 {
		c := f.Channel(ch)
		cur := receipt.Cursor{Position: receipt.Position{Seq: head}}
		if c != nil {
			cur.MessageID = c.Head.MessageID
		}
		out.Head = event.CursorToProto(cur)
	}

	var members []string
	if c := f.Channel(ch); c != nil && c.MembersComplete {
		members, out.MemberCount, err = g.redisMembers(ctx, ch, after, size)
	} else {
		members, out.MemberCount, err = g.durableMemberPage(ctx, ch, after, size)
	}
	if err != nil {
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		return nil, seam.UnavailableError(fmt.Errorf("reading the members of %s: %w; retry", ch, err))
	}
	if len(members) > size {
		members = members[:size]
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(members[size-1]))
	}
	out.Members = members
	return connect.NewResponse(out), nil
}

// redisMembers answers up to size+1 members after the given user, and the
// member count, from the channel's (complete) Redis hash.
func (g *Channels) redisMembers(ctx context.Context, ch, after string, size int) ([]string, int64, error) {
	regs, _, err := g.MemberStore().ChannelMembers(ctx, ch, nil)
	if err != nil {
		return nil, 0, err
	}
	var members []string
	var count int64
	for _, m := range regs {
		if m.Member {
			count++
			if m.Key.User > after {
				members = append(members, m.Key.User)
			}
		}
	}
	slices.Sort(members)
	return members[:min(len(members), size+1)], count, nil
}

func (g *Channels) durableMemberPage(ctx context.Context, ch, after string, size int) ([]string, int64, error) {
	if err := g.Settled(ctx, nil, []string{ch}); err != nil {
		return nil, 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	regs, err := g.MemberStore().ChannelPagePG(pctx, ch, after, size+1, true)
	if err != nil {
		return nil, 0, err
	}
	n, err := g.MemberStore().CountPG(pctx, ch)
	if err != nil {
		return nil, 0, err
	}
	members := make([]string, len(regs))
	for i, m := range regs {
		members[i] = m.Key.User
	}
	tracing.Logger(ctx, g.Log).Debug("channel members answered from Postgres", zap.String("channel_id", ch))
	return members, n, nil
}

// joined is what a membership change makes durable: the register, and the
// read a new join raises (nil: none).
type joined struct {
	reg  channel.Membership
	read *receipt.State
}

func (j joined) encode() (*kgo.Record, error) { return event.EncodeMembership(j.reg, j.read) }
