package gate_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
)

// decodedUntil reads the test topic from the start, every kind decoded,
// until done says so or 15s pass.
func (tb *testBundle) decodedUntil(t *testing.T, done func([]event.Decoded) bool) []event.Decoded {
	t.Helper()
	cl := tb.broker.Client(t, kgo.ConsumeTopics(tb.broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []event.Decoded
	for !done(out) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "waiting for records, have %d", len(out))
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetching %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			d, err := event.DecodeRecord(r)
			require.NoError(t, err)
			out = append(out, d)
		})
	}
	return out
}

// DELETE /v1/users/{user}: Redis holds nothing of the user when the answer
// comes, the erasure event is on the topic, a later mark is stamped with
// its generation (and the user starts over), other users are untouched.
func TestEraseUserREST(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, u := range []string{"erin", "other"} {
		code, body := tb.do(t, http.MethodPost, "/v1/receipts:mark", `{"receipts":[
			{"user_id":"`+u+`","channel_id":"c1","kind":"READ","seq":5},
			{"user_id":"`+u+`","channel_id":"c2","kind":"READ","seq":9}]}`)
		require.Equal(t, http.StatusOK, code, string(body))
	}

	before := time.Now().UnixMilli()
	code, body := tb.do(t, http.MethodDelete, "/v1/users/erin", "")
	require.Equal(t, http.StatusOK, code, string(body))
	var resp receiptsv1.EraseUserResponse
	require.NoError(t, protojson.Unmarshal(body, &resp))
	require.Equal(t, "erin", resp.GetUserId())
	require.GreaterOrEqual(t, resp.GetGeneration(), before)
	require.Equal(t, receiptsv1.Durability_KAFKA, resp.GetDurability())

	ctx := context.Background()
	states, complete, err := cursors.NewStore(tb.store).Get(ctx, "erin", nil)
	require.NoError(t, err)
	require.Empty(t, states)
	require.True(t, complete)
	others, _, err := cursors.NewStore(tb.store).Get(ctx, "other", nil)
	require.NoError(t, err)
	require.Len(t, others, 2)
	code, body = tb.do(t, http.MethodGet, "/v1/users/erin/read-state", "")
	require.Equal(t, http.StatusOK, code, string(body))
	require.NotContains(t, string(body), "c1", "the read answers from the empty hash, not from Postgres")

	code, body = tb.do(t, http.MethodPost, "/v1/users/erin/channels/c1/read", `{"seq": 2}`)
	require.Equal(t, http.StatusOK, code, string(body))
	var mr receiptsv1.MarkResponse
	require.NoError(t, protojson.Unmarshal(body, &mr))
	require.True(t, mr.GetResult().GetAdvanced(), "the user starts over at seq 2")

	evs := tb.decodedUntil(t, func(ds []event.Decoded) bool { return len(ds) >= 6 })
	require.Len(t, evs, 6)
	var erasures, stamped, unstamped int
	for _, d := range evs {
		switch {
		case d.Erasure != nil:
			erasures++
			require.Equal(t, "erin", d.Erasure.User)
			require.Equal(t, resp.GetGeneration(), d.Erasure.Generation)
		case d.Generation == resp.GetGeneration():
			stamped++
			require.Equal(t, receipt.Key{User: "erin", Channel: "c1"}, d.Key)
		default:
			require.Zero(t, d.Generation, "marks before the erasure carry no generation")
			unstamped++
		}
	}
	require.Equal(t, []int{1, 1, 4}, []int{erasures, stamped, unstamped})
}

func TestEraseUserRefusesBadInput(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	c := tb.client()
	for name, tc := range map[string]struct{ user, want string }{
		"empty":       {"", "user_id: is required"},
		"oversized":   {strings.Repeat("x", receipt.MaxIDLength+1), "user_id: is 129 bytes long"},
		"brace":       {"@a:b{", "user_id: contains '{'"},
		"colon first": {":a", "user_id: starts with ':'"},
		"control":     {"a\x01", "user_id: contains a control"},
	} {
		_, err := c.EraseUser(context.Background(), connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: tc.user}))
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	require.Zero(t, tb.highWatermarks(t), "nothing was produced")
}

// cutShort fails every command of the client it hooks once armed and
// its allowance is spent (a Redis that goes away mid-call), until
// disarmed.
type cutShort struct{ left atomic.Int64 }

func newCutShort() *cutShort {
	c := &cutShort{}
	c.disarm()
	return c
}

func (c *cutShort) arm(commands int64) { c.left.Store(commands) }
func (c *cutShort) disarm()            { c.left.Store(-1 << 62) }

func (c *cutShort) pass() error {
	if c.left.Load() < -1<<61 || c.left.Add(-1) >= 0 {
		return nil
	}
	return errors.New("redis went away (cut short)")
}

func (c *cutShort) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cutShort) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := c.pass(); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (c *cutShort) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := c.pass(); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// An erasure cut short (here: Redis goes away after a few of the
// commands cleaning 300 channels takes) answers Unavailable; its retries
// go on from the channels still pending, and one never retried is
// finished by the reconciler's pass (FinishErasures). Afterwards no
// channel's members, view or group mentions name the user.
func TestErasureCutShortIsFinished(t *testing.T) {
	t.Parallel()
	cut := newCutShort()
	gateRedis := redistest.Client(t)
	gateRedis.AddHook(cut)
	tb := setup(t, setupOpts{redis: gateRedis})
	ctx := context.Background()
	const n = 300
	join := func(u string) []string {
		var chs []string
		var items []string
		for i := range n {
			ch := u + "-ch" + strconv.Itoa(i)
			chs = append(chs, ch)
			tb.ok(t, http.MethodPut, "/v1/channels/"+ch+"/members/"+u, `{}`)
			items = append(items, `{"user_id":"`+u+`","channel_id":"`+ch+`","kind":"READ","seq":1}`)
		}
		tb.ok(t, http.MethodPost, "/v1/channels/"+chs[0]+"/messages", `{"seq": 1, "sender_id": "`+u+`", "mention_all": true}`)
		tb.ok(t, http.MethodPost, "/v1/receipts:mark", `{"receipts":[`+strings.Join(items, ",")+`]}`)
		return chs
	}
	clean := func(u string, chs []string) bool {
		for _, ch := range chs {
			if tb.rdb.HExists(ctx, members.NewStore(nil, tb.store).ChannelMembersKey(ch), u).Val() || tb.rdb.HExists(ctx, readby.NewStore(nil, tb.store).CurKey(ch), "r:"+u).Val() {
				return false
			}
		}
		for _, m := range tb.rdb.ZRange(ctx, groupmentions.NewStore(nil, tb.store).RedisKey(chs[0]), 0, -1).Val() {
			if strings.HasSuffix(m, u) {
				return false
			}
		}
		return tb.rdb.Exists(ctx, tb.store.ErasurePendingKey(u)).Val() == 0
	}

	eve := join("eve")
	cut.arm(60)
	status, _ := tb.do(t, http.MethodDelete, "/v1/users/eve", "")
	cut.disarm()
	require.Equal(t, http.StatusServiceUnavailable, status, "Redis went away midway")
	require.False(t, clean("eve", eve))
	for attempt := 0; status != http.StatusOK; attempt++ {
		require.Less(t, attempt, 200, "the retries finish the erasure")
		status, _ = tb.do(t, http.MethodDelete, "/v1/users/eve", "")
	}
	require.True(t, clean("eve", eve), "the retries cleaned every channel")

	fay := join("fay")
	cut.arm(60)
	status, _ = tb.do(t, http.MethodDelete, "/v1/users/fay", "")
	cut.disarm()
	require.Equal(t, http.StatusServiceUnavailable, status)
	n2, err := tb.store.FinishErasures(ctx, readby.NewStore(nil, tb.store).Redact(time.Now().UnixMilli(), kind.RedisRedact(kinds.All(), &kind.Env{Redis: tb.store})))
	require.NoError(t, err)
	require.Positive(t, n2)
	require.True(t, clean("fay", fay), "the reconciler's pass cleaned every channel")
}
