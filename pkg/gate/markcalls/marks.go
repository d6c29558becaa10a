package markcalls

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tracing"
)

// redisOpResolve labels the redis_degraded_total count of marks whose
// epoch neither store could resolve.
const redisOpResolve = "resolve_epoch"

// CheckMarks applies the channel rules to validated marks, all or
// nothing, before anything is written: a mark past a known channel head
// is Aborted (HEAD_BEHIND: a race with the message's notice, which a
// retry wins), and — unless AllowNonMemberMarks — a mark by a
// non-member of a channel with registered members is PermissionDenied.
// When Redis cannot answer, the checks are skipped (the write is still
// made durable and answers realtime_degraded).
func (g *Marks) CheckMarks(ctx context.Context, marks []Mark) error {
	keys := make([]receipt.Key, len(marks))
	for i, m := range marks {
		keys[i] = m.Key
	}
	f := g.Lookup(ctx, keys, false)
	if !f.Known {
		return nil
	}
	return g.checkEach(f, marks)
}

// checkEach checks marks against known facts, all or nothing.
func (g *Marks) checkEach(f *seam.Facts, marks []Mark) error {
	for _, m := range marks {
		if err := g.CheckMark(f, m); err != nil {
			return err
		}
	}
	return nil
}

func (g *Marks) CheckMark(f *seam.Facts, m Mark) error {
	if head := f.Head(m.Key.Channel); head > 0 && m.Seq > head {
		return seam.HeadBehind(m.Field+"seq", m.Seq, head)
	}
	if g.Cfg.AllowNonMemberMarks {
		return nil
	}
	if member, registered := f.Member(m.Key); registered && !member {
		return seam.NotMember(m.Field, m.Key)
	}
	return nil
}

// ResolveEpochs returns what to produce for each state: the state with
// its epochs resolved by Redis, or — where the Redis merge failed — by
// the key's read epoch in Postgres (0 for a key it has no row of). A mark
// without an epoch must never travel as receipt.EpochCurrent, and
// when neither store answers it travels at epoch 0 (see below). A mark
// with an explicit epoch Redis did not check is checked against Postgres
// (receipt.EpochAhead); when it is ahead there, or Postgres cannot answer
// either, the flush fails (nothing acknowledged, the callers retry).
func (g *Marks) ResolveEpochs(ctx context.Context, states []receipt.State, merged []cursors.MergeResult) ([]receipt.State, error) {
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
	epochs, err := cursors.NewPostgres(g.PG).ReadEpochs(pctx, unresolved)
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
