package gate

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// redisOpResolve labels the redis_degraded_total count of marks whose
// epoch neither store could resolve.
const redisOpResolve = "resolve_epoch"

// errBeyondHead is the reason of a mark past the channel's known head.
const errBeyondHead = "seq beyond channel head"

// HeadBehindRetryAfter is the Retry-After of a mark beyond the known
// head (HEAD_BEHIND). The message's notice travels the upstream's other
// pipeline and is usually in within milliseconds: one second is the
// shortest delay the header can say, and a client that retries sooner
// only costs a Redis read.
const HeadBehindRetryAfter = time.Second

// checkMarks applies the channel rules to validated marks, all or
// nothing, before anything is written: a mark past a known channel head
// is Aborted (HEAD_BEHIND: a race with the message's notice, which a
// retry wins), and — unless AllowNonMemberMarks — a mark by a
// non-member of a channel with registered members is PermissionDenied.
// When Redis cannot answer, the checks are skipped (the write is still
// made durable and answers realtime_degraded).
func (g *Gate) checkMarks(ctx context.Context, marks []mark) error {
	keys := make([]receipt.Key, len(marks))
	for i, m := range marks {
		keys[i] = m.key
	}
	f := g.Lookup(ctx, keys, false)
	if !f.Known {
		return nil
	}
	return g.checkEach(f, marks)
}

// checkEach checks marks against known facts, all or nothing.
func (g *Gate) checkEach(f *seam.Facts, marks []mark) error {
	for _, m := range marks {
		if err := g.checkMark(f, m); err != nil {
			return err
		}
	}
	return nil
}

func (g *Gate) checkMark(f *seam.Facts, m mark) error {
	if head := f.Head(m.key.Channel); head > 0 && m.seq > head {
		return headBehind(m.field+"seq", m.seq, head)
	}
	if g.Cfg.AllowNonMemberMarks {
		return nil
	}
	if member, registered := f.Member(m.key); registered && !member {
		return notMember(m.field, m.key)
	}
	return nil
}

// headBehind is the answer to a mark beyond the head the service knows:
// the notice of its message has not arrived yet, so it is a race the
// caller wins by retrying (Aborted, HTTP 409, with Retry-After), not a
// bad request.
func headBehind(field string, seq, head int64) error {
	return apierr.New(connect.CodeAborted, apierr.HeadBehind,
		&receipt.FieldError{Field: field, Reason: fmt.Sprintf("%s (seq %d, head %d); the message's notice has not arrived yet, retry", errBeyondHead, seq, head)},
		apierr.Head(head), apierr.RetryAfter(HeadBehindRetryAfter))
}

// beyondHead is the refusal of a join point beyond the channel's head:
// InvalidArgument, SEQ_BEYOND_HEAD.
func beyondHead(field string, seq, head int64) error {
	return seam.Invalid(apierr.SeqBeyondHead, &receipt.FieldError{Field: field, Reason: fmt.Sprintf("%s (seq %d, head %d)", errBeyondHead, seq, head)}, apierr.Head(head))
}

func notMember(prefix string, k receipt.Key) error {
	return apierr.New(connect.CodePermissionDenied, apierr.NotAMember,
		fmt.Errorf("%suser_id: %q is not a member of channel %q", prefix, k.User, k.Channel), apierr.Field(prefix+"user_id"))
}

// resolveEpochs returns what to produce for each state: the state with
// its epochs resolved by Redis, or — where the Redis merge failed — by
// the key's read epoch in Postgres (0 for a key it has no row of). A mark
// without an epoch must never travel as receipt.EpochCurrent, and
// when neither store answers it travels at epoch 0 (see below). A mark
// with an explicit epoch Redis did not check is checked against Postgres
// (receipt.EpochAhead); when it is ahead there, or Postgres cannot answer
// either, the flush fails (nothing acknowledged, the callers retry).
func (g *Gate) resolveEpochs(ctx context.Context, states []receipt.State, merged []redisstore.MergeResult) ([]receipt.State, error) {
	out := make([]receipt.State, len(states))
	var unresolved []receipt.Key
	explicit := 0
	for i, st := range states {
		if merged[i].Err == nil {
			out[i] = merged[i].Resolved
			continue
		}
		out[i] = st
		switch {
		case st.Read.Position.Epoch == receipt.EpochCurrent || st.PrivateRead.Position.Epoch == receipt.EpochCurrent:
			unresolved = append(unresolved, st.Key)
		case receipt.EpochAhead(receipt.State{}, st):
			// An explicit epoch above 0 that Redis did not check: Postgres does.
			unresolved = append(unresolved, st.Key)
			explicit++
		}
	}
	if len(unresolved) == 0 {
		return out, nil
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	epochs, err := g.PG.ReadEpochs(pctx, unresolved)
	cancel()
	if err != nil {
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		if explicit > 0 {
			// An explicit epoch neither store can check could move a
			// public cursor back (receipt.EpochAhead): nothing is
			// acknowledged, the caller retries.
			return nil, fmt.Errorf("checking %d explicit epochs without Redis or Postgres: %w", explicit, err)
		}
		// Both stores are down. The gate keeps accepting marks (their
		// durability does not need either store), at epoch 0: a key
		// marked unread before (epoch > 0) would make such a mark lose,
		// which is why a client that saw an epoch should send it.
		g.M.RedisDegraded.WithLabelValues(redisOpResolve).Add(float64(len(unresolved)))
		g.ResolveWarn.Do(func() {
			tracing.Logger(ctx, g.Log).Warn("resolving read epochs without Redis or Postgres; marks without an epoch travel at epoch 0",
				zap.Int("num_marks", len(unresolved)), zap.Error(err))
		})
		epochs = nil
	}
	for i := range out {
		e := epochs[out[i].Key]
		if merged[i].Err != nil && receipt.EpochAhead(receipt.State{Read: receipt.Cursor{Position: receipt.Position{Epoch: e}}}, out[i]) {
			// Ahead of Postgres, which may lag a mark-unread Redis
			// acknowledged: unknown, so not acknowledged (retry).
			return nil, fmt.Errorf("the explicit epoch of %s is ahead of the read epoch %d in Postgres and Redis cannot check it", out[i].Key.KafkaKey(), e)
		}
		if out[i].Read.Position.Epoch == receipt.EpochCurrent {
			out[i].Read.Position.Epoch = e
		}
		if out[i].PrivateRead.Position.Epoch == receipt.EpochCurrent {
			out[i].PrivateRead.Position.Epoch = e
		}
	}
	return out, nil
}
