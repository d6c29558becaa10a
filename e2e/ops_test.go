package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// ops runs, beside the mark driver, every other kind of call under the
// faults, from clients over REST (HTTP/JSON routes), gRPC and Connect
// JSON, and records each in the history: mark-unread on the driver's keys,
// reads of the driver's users through the API, privacy settings of the
// driver's users, joins and leaves of users q* in channels g*, and users
// e* who mark and are erased. Like an upstream server, a client retries a
// failed write until it is acknowledged (what the gateway merged into
// Redis before a failure becomes durable with the retry).
type ops struct {
	d    *driver
	h    *history
	api  string
	stop chan struct{}
	wg   sync.WaitGroup
	// calls counts acknowledged calls by kind, errs failed attempts.
	calls sync.Map // string → *atomic.Int64
	errs  atomic.Int64
	// eseq is the e* users' mark counter.
	eseq atomic.Int64
}

// opsVias are the protocols of the ops clients, one client each.
var opsVias = []string{"rest", "grpc", "connect"}

func startOps(api string, d *driver, h *history, seed uint64) *ops {
	o := &ops{d: d, h: h, api: api, stop: make(chan struct{})}
	for i, via := range opsVias {
		o.wg.Go(func() { o.client(newOpsClient(api, via), seed+uint64(i)) })
	}
	return o
}

func (o *ops) halt() {
	close(o.stop)
	o.wg.Wait()
}

func (o *ops) count(kind string) {
	v, _ := o.calls.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// summary is the acknowledged calls by kind.
func (o *ops) summary() map[string]int64 {
	out := map[string]int64{}
	o.calls.Range(func(k, v any) bool { out[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return out
}

// opsClient calls the API over one protocol.
type opsClient struct {
	via  string
	base string
	hc   *http.Client
	cl   receiptsv1connect.ReceiptServiceClient
}

func newOpsClient(api, via string) *opsClient {
	c := &opsClient{via: via, base: "http://" + api, hc: &http.Client{Timeout: 15 * time.Second}}
	switch via {
	case "grpc":
		c.hc.Transport = h2cTransport()
		c.cl = receiptsv1connect.NewReceiptServiceClient(c.hc, c.base, connect.WithGRPC())
	default:
		c.cl = receiptsv1connect.NewReceiptServiceClient(c.hc, c.base, connect.WithProtoJSON())
	}
	return c
}

// apiCall runs f over gRPC or Connect, or the REST route method path (with
// req as the JSON body when body is set) over REST, into out.
func apiCall[Req, Resp any](ctx context.Context, c *opsClient, f func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error),
	req *Req, method, path string, body bool) (*Resp, error) {
	if c.via != "rest" {
		resp, err := f(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	var rd io.Reader
	if body {
		b, err := protojson.Marshal(any(req).(proto.Message))
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	defer hresp.Body.Close()
	b, err := io.ReadAll(hresp.Body)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	if hresp.StatusCode != http.StatusOK {
		return nil, restRefusal(method, path, hresp.StatusCode, b)
	}
	out := new(Resp)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, any(out).(proto.Message)); err != nil {
		return nil, err
	}
	return out, nil
}

// until runs a write until it is acknowledged or fails for good; after
// halt it keeps retrying for at most a minute. It reports success.
// restRefusal is a REST error answer as the error a client of the other
// protocols gets: the body's code, and its ErrorInfo's reason when it has
// one; a body without a code (a proxy, a gateway going down) is
// Unavailable.
func restRefusal(method, path string, status int, body []byte) error {
	err := fmt.Errorf("%s %s: HTTP %d: %s", method, path, status, body)
	var st struct{ Code connect.Code }
	code := connect.CodeUnavailable
	if json.Unmarshal(body, &st) == nil && st.Code > 0 {
		code = st.Code
	}
	if reason := apierr.InfoOfREST(body).GetReason(); reason != "" {
		return apierr.New(code, apierr.Reason(reason), err)
	}
	return connect.NewError(code, err)
}

func (o *ops) until(f func(ctx context.Context) error) bool {
	var deadline time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return true
		}
		o.errs.Add(1)
		if !retryable(err) {
			return false
		}
		select {
		case <-o.stop:
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Minute)
			}
			if time.Now().After(deadline) {
				return false
			}
		default:
		}
		time.Sleep(100 * time.Millisecond) // a client's back-off between retries, not synchronisation
	}
}

func (o *ops) client(c *opsClient, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	for n := 0; ; n++ {
		select {
		case <-o.stop:
			return
		default:
		}
		device := fmt.Sprintf("ops-%s-%d", c.via, n)
		switch p := rng.IntN(100); {
		case p < 25:
			o.markUnread(c, rng, device)
		case p < 60:
			o.read(c, rng)
		case p < 70:
			o.settings(c, rng)
		case p < 85:
			o.membership(c, rng)
		default:
			o.eraseOrMark(c, rng, device)
		}
		if o.d.w.pause > 0 {
			time.Sleep(o.d.w.pause) // the load's pace, not synchronisation
		}
	}
}

func (o *ops) driverKey(rng *rand.Rand) receipt.Key {
	return receipt.Key{User: fmt.Sprintf("u%d", rng.IntN(o.d.w.users)), Channel: fmt.Sprintf("c%d", rng.IntN(o.d.w.channels))}
}

// markUnread marks a driver key unread from a seq the driver has sent.
func (o *ops) markUnread(c *opsClient, rng *rand.Rand, device string) {
	k := o.driverKey(rng)
	cur := o.d.nextSeq(k).Load()
	if cur < 3 {
		return
	}
	req := &receiptsv1.MarkUnreadRequest{UserId: k.User, ChannelId: k.Channel, Seq: 1 + rng.Int64N(cur), DeviceId: device}
	var res *receiptsv1.ReceiptResult
	o.until(func(ctx context.Context) error {
		o.h.unread(k) // every attempt may move the epoch
		resp, err := apiCall(ctx, c, c.cl.MarkUnread, req, http.MethodPost,
			fmt.Sprintf("/v1/users/%s/channels/%s/unread", k.User, k.Channel), true)
		if err == nil {
			res = resp.GetResult()
		}
		return err
	})
	if res == nil {
		return
	}
	o.d.sawEpoch(k, res.GetEpoch()+1) // the private read's
	if res.GetDurability() != receiptsv1.Durability_DURABILITY_UNSPECIFIED {
		o.count("mark-unread")
		o.h.ack(unreadWrite(k, req.Seq, device, res.GetDurability().String()))
	}
}

// read reads a driver user's state in every driver channel; a channel the
// answer leaves out is recorded as nothing read.
func (o *ops) read(c *opsClient, rng *rand.Rand) {
	user := fmt.Sprintf("u%d", rng.IntN(o.d.w.users))
	req := &receiptsv1.GetReadStateRequest{UserId: user}
	q := url.Values{}
	for i := range o.d.w.channels {
		ch := fmt.Sprintf("c%d", i)
		req.ChannelId = append(req.ChannelId, ch)
		q.Add("channel_id", ch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	start := time.Now()
	resp, err := apiCall(ctx, c, c.cl.GetReadState, req, http.MethodGet, "/v1/users/"+user+"/read-state?"+q.Encode(), false)
	end := time.Now()
	cancel()
	if err != nil {
		o.errs.Add(1)
		return
	}
	o.count("read")
	got := map[string]*receiptsv1.ChannelState{}
	for _, st := range resp.GetChannels() {
		got[st.GetChannelId()] = st
	}
	for _, ch := range req.ChannelId {
		k := receipt.Key{User: user, Channel: ch}
		st := receipt.State{Key: k}
		if p := got[ch]; p != nil {
			st.Read = cursorOf(p.GetRead())
			st.Delivered = cursorOf(p.GetDelivered())
			st.PrivateRead = cursorOf(p.GetPrivateRead())
		}
		o.h.read(apiRead{key: k, start: start, end: end, state: st, via: c.via})
	}
}

func cursorOf(c *receiptsv1.Cursor) receipt.Cursor {
	return receipt.Cursor{Position: receipt.Position{Epoch: c.GetPosition().GetEpoch(), Seq: c.GetPosition().GetSeq()}, MessageID: c.GetMessageId()}
}

// settings changes a driver user's privacy settings.
func (o *ops) settings(c *opsClient, rng *rand.Rand) {
	user := fmt.Sprintf("u%d", rng.IntN(o.d.w.users))
	req := &receiptsv1.UpdateSettingsRequest{UserId: user, ShareReadReceipts: proto.Bool(rng.IntN(2) == 0)}
	if rng.IntN(2) == 0 {
		req.ShareDeliveryReceipts = proto.Bool(rng.IntN(2) == 0)
	}
	var out *receiptsv1.UserSettings
	o.until(func(ctx context.Context) error {
		resp, err := apiCall(ctx, c, c.cl.UpdateSettings, req, http.MethodPut, "/v1/users/"+user+"/settings", true)
		out = resp
		return err
	})
	if out == nil {
		return
	}
	o.count("settings")
	o.h.ack(settingsWrite(user, out.GetVersionUnixMs(), out.GetShareReadReceipts(), out.GetShareDeliveryReceipts()))
}

// membership joins (at the head, or at a seq of its own) or leaves.
func (o *ops) membership(c *opsClient, rng *rand.Rand) {
	k := receipt.Key{User: fmt.Sprintf("q%d", rng.IntN(8)), Channel: fmt.Sprintf("g%d", rng.IntN(4))}
	var out *receiptsv1.MembershipResponse
	if rng.IntN(2) == 0 {
		req := &receiptsv1.JoinChannelRequest{ChannelId: k.Channel, UserId: k.User}
		if rng.IntN(2) == 0 {
			req.Seq = proto.Int64(rng.Int64N(50))
		}
		o.until(func(ctx context.Context) error {
			resp, err := apiCall(ctx, c, c.cl.JoinChannel, req, http.MethodPut, "/v1/channels/"+k.Channel+"/members/"+k.User, true)
			out = resp
			return err
		})
	} else {
		req := &receiptsv1.LeaveChannelRequest{ChannelId: k.Channel, UserId: k.User}
		o.until(func(ctx context.Context) error {
			resp, err := apiCall(ctx, c, c.cl.LeaveChannel, req, http.MethodDelete, "/v1/channels/"+k.Channel+"/members/"+k.User, false)
			out = resp
			return err
		})
	}
	if out == nil || out.GetDurability() == receiptsv1.Durability_DURABILITY_UNSPECIFIED {
		return
	}
	m := out.GetMembership()
	o.count("join/leave")
	o.h.ack(membershipWrite(channel.Membership{Key: k, Member: m.GetMember(), VersionSeq: m.GetVersionSeq(),
		VersionUnixMs: m.GetVersionUnixMs(), JoinSeq: m.GetJoinSeq()}, out.GetDurability().String()))
}

// eraseOrMark marks as a user e* (mostly) or erases one: the marks an
// acknowledged erasure drops must not be in Postgres, the later ones must.
func (o *ops) eraseOrMark(c *opsClient, rng *rand.Rand, device string) {
	user := fmt.Sprintf("e%d", rng.IntN(4))
	if rng.IntN(4) == 0 {
		var out *receiptsv1.EraseUserResponse
		o.until(func(ctx context.Context) error {
			resp, err := apiCall(ctx, c, c.cl.EraseUser, &receiptsv1.EraseUserRequest{UserId: user}, http.MethodDelete, "/v1/users/"+user, false)
			out = resp
			return err
		})
		if out != nil && out.GetDurability() != receiptsv1.Durability_DURABILITY_UNSPECIFIED {
			o.count("erase")
			o.h.ack(erasureWrite(user, out.GetGeneration(), out.GetDurability().String()))
		}
		return
	}
	req := &receiptsv1.MarkReceiptsRequest{}
	for i := range 3 {
		seq := o.eseq.Add(1)
		req.Receipts = append(req.Receipts, &receiptsv1.Receipt{UserId: user, ChannelId: fmt.Sprintf("c%d", i), Kind: receiptsv1.Kind_READ,
			Seq: seq, MessageId: fmt.Sprintf("m%d", seq), DeviceId: device})
	}
	var out *receiptsv1.MarkReceiptsResponse
	o.until(func(ctx context.Context) error {
		resp, err := apiCall(ctx, c, c.cl.MarkReceipts, req, http.MethodPost, "/v1/receipts:mark", true)
		out = resp
		return err
	})
	if out == nil {
		return
	}
	for i, res := range out.GetResults() {
		if res.GetDurability() == receiptsv1.Durability_DURABILITY_UNSPECIFIED {
			continue
		}
		r := req.Receipts[i]
		o.count("mark (erased users)")
		o.h.ack(markWrite(receipt.Key{User: r.UserId, Channel: r.ChannelId}, "read", r.Seq, nil, device, res.GetDurability().String()))
	}
}
