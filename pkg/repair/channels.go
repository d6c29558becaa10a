package repair

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// RepairDecoded applies every part of a decoded event to both stores by
// its merge rule: cursors as Repair; a head, a membership register,
// mention seqs and privacy settings each merged with the key's Redis value, upserted into
// Postgres, and what Postgres then holds merged back into Redis. Only a
// Postgres failure is returned, as for Repair.
//
// Erasures: an erasure event deletes the user's Postgres rows (pgstore.Erase,
// a no-op when Postgres already holds that generation; Redis was erased by
// the gateway before the event was produced, and is not erased again: a
// dead letter replayed late must not wipe what the user wrote since). An
// event of an erased user that predates the erasure (tombstone.Drops) is
// dropped, and one that does not first brings Postgres up to the erasure
// when Redis holds a newer one, so that no row the erasure deletes is
// merged back.
func (r *Repairer) RepairDecoded(ctx context.Context, d event.Decoded) error {
	if d.Erasure != nil {
		if _, _, err := r.Postgres.Erase(ctx, *d.Erasure); err != nil {
			return err
		}
		return nil
	}
	if d.Channel == nil {
		drop, err := r.erased(ctx, d)
		if err != nil || drop {
			return err
		}
	}
	if d.Receipt != nil {
		if _, err := r.Repair(ctx, *d.Receipt); err != nil {
			return err
		}
	}
	if d.Channel != nil {
		if _, err := r.RepairHead(ctx, *d.Channel); err != nil {
			return err
		}
	}
	if d.Membership != nil {
		if _, err := r.RepairMembership(ctx, *d.Membership); err != nil {
			return err
		}
	}
	if len(d.Mentions) > 0 {
		if _, err := r.RepairMentions(ctx, channel.Mentions{Key: d.Key, Seqs: d.Mentions}); err != nil {
			return err
		}
	}
	if d.Settings != nil {
		if _, err := r.RepairSettings(ctx, *d.Settings); err != nil {
			return err
		}
	}
	return nil
}

func (r *Repairer) mentionCap() int {
	if r.MentionCap > 0 {
		return r.MentionCap
	}
	return channel.MentionCapDefault
}

// RepairHead merges a head into both stores (max rule) and returns the
// head both then hold.
func (r *Repairer) RepairHead(ctx context.Context, h channel.Head) (channel.Head, error) {
	merged := h
	redisUp := r.Redis != nil
	if redisUp {
		cur, err := r.Redis.Heads(ctx, []string{h.Channel})
		if err != nil {
			redisUp = false
			r.redisDegraded("reading the redis head", receipt.Key{Channel: h.Channel}, err)
		} else if c, ok := cur[h.Channel]; ok {
			merged, _ = channel.MergeHead(c, h)
		}
	}
	if _, err := r.Postgres.UpsertHeads(ctx, []channel.Head{merged}); err != nil {
		return merged, fmt.Errorf("upserting the head of %s: %w", h.Channel, err)
	}
	if !redisUp {
		return merged, nil
	}
	final := merged
	if rows, err := r.Postgres.Heads(ctx, []string{h.Channel}); err == nil && len(rows) == 1 {
		final, _ = channel.MergeHead(rows[0], merged)
	}
	res, err := r.Redis.RaiseHeads(ctx, []channel.Head{final})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		r.redisDegraded("raising the redis head", receipt.Key{Channel: h.Channel}, err)
	}
	return final, nil
}

// RepairMembership merges a register into both stores (the greater
// register wins; in Redis both the user's and the channel's hash) and
// returns the register both then hold.
func (r *Repairer) RepairMembership(ctx context.Context, m channel.Membership) (channel.Membership, error) {
	merged := m
	redisUp := r.Redis != nil
	if redisUp {
		cur, _, err := r.Redis.Memberships(ctx, m.Key.User, []string{m.Key.Channel})
		if err != nil {
			redisUp = false
			r.redisDegraded("reading the redis membership", m.Key, err)
		} else if len(cur) == 1 {
			merged, _ = channel.MergeMembership(cur[0], m)
		}
	}
	if _, err := r.Postgres.UpsertMembers(ctx, []channel.Membership{merged}); err != nil {
		return merged, fmt.Errorf("upserting the membership of %s: %w", m.Key.KafkaKey(), err)
	}
	if !redisUp {
		return merged, nil
	}
	final := merged
	if rows, err := r.Postgres.Memberships(ctx, m.Key.User, []string{m.Key.Channel}); err == nil && len(rows) == 1 {
		final, _ = channel.MergeMembership(rows[0], merged)
	}
	res, err := r.Redis.MergeMemberships(ctx, []channel.Membership{final})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		r.redisDegraded("merging the redis membership", m.Key, err)
	}
	return final, nil
}

// RepairMentions adds mention seqs to both stores (a set union, kept to
// the newest cap+1) and returns the seqs both then hold.
func (r *Repairer) RepairMentions(ctx context.Context, m channel.Mentions) ([]int64, error) {
	mcap := r.mentionCap()
	merged := channel.MergeMentions(nil, m.Seqs, mcap)
	redisUp := r.Redis != nil
	if redisUp {
		cur, err := r.Redis.MentionSeqs(ctx, []receipt.Key{m.Key})
		if err != nil {
			redisUp = false
			r.redisDegraded("reading the redis mentions", m.Key, err)
		} else {
			merged = channel.MergeMentions(cur[0], merged, mcap)
		}
	}
	if _, err := r.Postgres.InsertMentions(ctx, []channel.Mentions{{Key: m.Key, Seqs: merged}}); err != nil {
		return merged, fmt.Errorf("inserting the mentions of %s: %w", m.Key.KafkaKey(), err)
	}
	if _, err := r.Postgres.TrimMentions(ctx, []receipt.Key{m.Key}, mcap); err != nil {
		return merged, fmt.Errorf("trimming the mentions of %s: %w", m.Key.KafkaKey(), err)
	}
	if !redisUp {
		return merged, nil
	}
	final := merged
	if rows, err := r.Postgres.Mentions(ctx, m.Key.User, []string{m.Key.Channel}, mcap); err == nil && len(rows) == 1 {
		final = channel.MergeMentions(rows[0].Seqs, merged, mcap)
	}
	if err := r.Redis.AddMentions(ctx, []channel.Mentions{{Key: m.Key, Seqs: final}}, mcap); err != nil {
		r.redisDegraded("adding the redis mentions", m.Key, err)
	}
	return final, nil
}

// erased reports whether the user event d predates its user's erasure, as
// the tombstones of both stores say; when Redis holds a newer erasure
// than Postgres (the persister has not applied it yet), it applies it to
// Postgres first. Redis is degradable: without it, Postgres' tombstone
// alone decides.
func (r *Repairer) erased(ctx context.Context, d event.Decoded) (bool, error) {
	user := d.User()
	pgT, err := r.Postgres.Tombstone(ctx, user)
	if err != nil {
		return false, err
	}
	t := pgT
	if r.Redis != nil {
		rdT, err := r.Redis.Tombstone(ctx, user)
		switch {
		case err != nil:
			r.redisDegraded("reading the redis tombstone", d.Key, err)
		case rdT.Generation > pgT.Generation:
			if _, _, err := r.Postgres.Erase(ctx, rdT); err != nil {
				return false, fmt.Errorf("applying the erasure of %s: %w", user, err)
			}
			t = rdT
		}
	}
	if !t.Drops(d.Generation, d.AcceptedAt()) {
		return false, nil
	}
	if r.Logger != nil {
		r.Logger.Info("dropping an event that predates its user's erasure", zap.String("key", d.RecordKey()),
			zap.Int64("generation", d.Generation), zap.Int64("erased_generation", t.Generation))
	}
	return true, nil
}

// RepairSettings merges a settings register into both stores (the greater
// version wins; on a tie the one sharing less) and returns the register
// both then hold. When Redis' register changes, the user's channel views
// follow it (a kind no longer shared leaves them), as after the gateway's
// UpdateSettings: a repair must not leave a hidden read on show.
func (r *Repairer) RepairSettings(ctx context.Context, st privacy.Settings) (privacy.Settings, error) {
	merged := st
	redisUp := r.Redis != nil
	var before privacy.Settings
	var inRedis bool
	if redisUp {
		cur, found, err := r.Redis.Settings(ctx, []string{st.User})
		if err != nil {
			redisUp = false
			r.redisDegraded("reading the redis settings", receipt.Key{User: st.User}, err)
		} else if found[0] {
			before, inRedis = cur[0], true
			merged, _ = privacy.Merge(cur[0], st)
		}
	}
	if _, err := r.Postgres.UpsertSettings(ctx, []privacy.Settings{merged}); err != nil {
		return merged, fmt.Errorf("upserting the settings of %s: %w", st.User, err)
	}
	if !redisUp {
		return merged, nil
	}
	final := merged
	if rows, err := r.Postgres.Settings(ctx, []string{st.User}); err == nil && len(rows) == 1 {
		final, _ = privacy.Merge(rows[0], merged)
	}
	res, err := r.Redis.MergeSettings(ctx, []privacy.Settings{final})
	if err == nil && (!inRedis || res[0] != before) {
		err = r.Redis.ApplySettingsToViews(ctx, res[0], r.ViewStreamMaxLen)
	}
	if err != nil {
		r.redisDegraded("merging the redis settings", receipt.Key{User: st.User}, err)
	}
	return final, nil
}
