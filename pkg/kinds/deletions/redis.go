package deletions

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// A channel's deleted messages, or a thread's deleted replies:
//
//	del:{channel}       sorted set: member and score the deleted seq
//	                    (exact below 2^53, as every seq a chat assigns),
//	                    kept within channel.DeletionWindow of the greatest
//	del:{channel}:ROOT  the same, of the thread with that root
//	dn:{channel}:ROOT   the thread set's size, once hydrated from
//	                    Postgres (absent: unknown)
//
// A channel's set's size is the fourth part of its channel value
// (heads.Store.RedisKey), known once hydrated, so the unread read
// (one MGET of the channel values) costs a channel without deletions
// ("0") nothing more. Every key carries the channel's hash tag: one
// script writes a set and its count. A thread's deletions are counted
// here (CountRedis); a channel's too (CountChannelsRedis), for the unread
// view, which reads the channel's count with its head and asks only
// where it is above 0.

// keyTag starts the key of a set, countTag that of a thread set's count
// (after the store's prefix).
const (
	keyTag   = "del:"
	countTag = "dn:"
)

// hydrateChunk bounds the seqs of one hydrate script call.
const hydrateChunk = 5000

// rootSuffix names a thread's key beside its channel's ("": the channel).
func rootSuffix(root int64) string {
	if root == 0 {
		return ""
	}
	return ":" + strconv.FormatInt(root, 10)
}

// RedisKey is the deleted-seq set of a channel (Root 0) or a thread.
func (s Store) RedisKey(r thread.Ref) string {
	return s.redis.Prefix() + keyTag + "{" + r.Channel + "}" + rootSuffix(r.Root)
}

// CountKey is the size of a thread's set (absent: unknown); a channel's
// is part of its channel value.
func (s Store) CountKey(r thread.Ref) string {
	return s.redis.Prefix() + countTag + "{" + r.Channel + "}" + rootSuffix(r.Root)
}

var (
	//go:embed add.lua
	luaAdd string
	//go:embed count.lua
	luaCount string
	// luaSeqRun is the Lua function seqrun(z) telling how a sorted set z
	// of seqs changes a reader's counts (ARGV the read seq, the head and
	// seqs to look up), shared by the counts of a thread's set and a
	// channel's.
	//go:embed seqrun.lua
	luaSeqRun string

	addScript          = redis.NewScript(heads.LuaChannelValue + luaAdd)
	countScript        = redis.NewScript(luaSeqRun + luaCount)
	countChannelScript = redis.NewScript(luaSeqRun + "return seqrun(KEYS[1])\n")

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{addScript, countScript, countChannelScript}
)

func (s Store) queueAdd(ctx context.Context, pipe redis.Pipeliner, ref thread.Ref, seqs []int64, mark bool) *redis.Cmd {
	args := make([]any, 0, len(seqs)+2)
	m := "0"
	if mark {
		m = "1"
	}
	args = append(args, channel.DeletionWindow, m)
	for _, q := range seqs {
		args = append(args, q)
	}
	if ref.Root == 0 {
		args[1] = "v" + m
		return addScript.EvalSha(ctx, pipe, []string{heads.NewStore(nil, s.redis).RedisKey(ref.Channel), s.RedisKey(ref)}, args...)
	}
	return addScript.EvalSha(ctx, pipe, []string{s.CountKey(ref), s.RedisKey(ref)}, args...)
}

// AddRedis adds deleted seqs to their sets in one pipeline (a union: a
// repeat changes nothing); errs holds one error per value.
func (s Store) AddRedis(ctx context.Context, ds []channel.Deletions) ([]error, error) {
	cmds := make([]*redis.Cmd, len(ds))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, d := range ds {
			cmds[i] = s.queueAdd(ctx, pipe, thread.Ref{Channel: d.Channel, Root: d.Root}, d.Seqs, false)
		}
	}, Scripts...)
	errs := make([]error, len(ds))
	for i, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil {
			errs[i] = fmt.Errorf("%w: deleting in %s: %w", redisstore.ErrUnavailable, ds[i].Channel, cerr)
		}
	}
	return errs, err
}

// HydrateRedis merges the durable deletions of sets (ds: those that have
// any) into Redis and marks every listed set's count as kept, so later
// reads need not ask Postgres again.
func (s Store) HydrateRedis(ctx context.Context, refs []thread.Ref, ds []channel.Deletions) error {
	bySet := make(map[thread.Ref][]int64, len(ds))
	for _, d := range ds {
		bySet[thread.Ref{Channel: d.Channel, Root: d.Root}] = d.Seqs
	}
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, ref := range refs {
			seqs := bySet[ref]
			for len(seqs) > hydrateChunk { // the marking part last
				s.queueAdd(ctx, pipe, ref, seqs[:hydrateChunk], false)
				seqs = seqs[hydrateChunk:]
			}
			s.queueAdd(ctx, pipe, ref, seqs, true)
		}
	}, Scripts...)
	if err != nil {
		return fmt.Errorf("hydrating deletions: %w", err)
	}
	return nil
}

// HydrateRedisPage adds one page of a set copied from Postgres in pages,
// ascending; the last page marks the set's count as kept. Live deletions
// may land between pages (a union), and until the last page the set
// reads as unknown.
func (s Store) HydrateRedisPage(ctx context.Context, ref thread.Ref, seqs []int64, last bool) error {
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) { s.queueAdd(ctx, pipe, ref, seqs, last) }, Scripts...)
	if err != nil {
		return fmt.Errorf("hydrating the deletions of %s: %w", ref, err)
	}
	return nil
}

// ReadRedis returns, per set of refs, the deleted seqs Redis holds (nil:
// no set), ascending.
func (s Store) ReadRedis(ctx context.Context, refs []thread.Ref) ([][]int64, error) {
	cmds := make([]*redis.StringSliceCmd, len(refs))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			cmds[i] = pipe.ZRange(ctx, s.RedisKey(ref), 0, -1)
		}
	}); err != nil {
		return nil, err
	}
	out := make([][]int64, len(refs))
	for i, cmd := range cmds {
		ms, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading the deletions of %s: %w", redisstore.ErrUnavailable, refs[i], err)
		}
		for _, m := range ms {
			q, err := strconv.ParseInt(m, 10, 64)
			if err != nil || q <= 0 {
				s.redis.SkipUndecodable()
				continue
			}
			out[i] = append(out[i], q)
		}
	}
	return out, nil
}

// ScanRedisSets returns one SCAN page of the sets, channels' and
// threads' (a key whose root does not parse is skipped), and the cursor
// of the next page.
func (s Store) ScanRedisSets(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]thread.Ref, redisstore.ScanCursor, error) {
	ids, tails, next, err := s.redis.ScanTaggedTails(ctx, keyTag, cur, count)
	refs := make([]thread.Ref, 0, len(ids))
	for i, id := range ids {
		ref := thread.Ref{Channel: id}
		if tails[i] != "" {
			root, ok := strings.CutPrefix(tails[i], ":")
			q, perr := strconv.ParseInt(root, 10, 64)
			if !ok || perr != nil || q <= 0 {
				s.redis.SkipUndecodable()
				continue
			}
			ref.Root = q
		}
		refs = append(refs, ref)
	}
	return refs, next, err
}

// Query asks how a set's deletions change one user's counts: the
// effective read seq, the head, and the user's kept mentions above the
// read.
type Query struct {
	Ref        thread.Ref
	Read, Head int64
	Mentions   []int64
}

// Count answers a Query: Known false when Redis does not know the set
// (read Postgres, HydrateRedis); else the deletions in (read, head], the
// first seq above the read not deleted and the deleted mentions.
type Count struct {
	Known              bool
	Deleted, FirstKept int64
	DeletedMentions    []int64
}

// CountRedis answers queries of sets whose count is kept apart (threads')
// in one pipeline, a script each.
func (s Store) CountRedis(ctx context.Context, qs []Query) ([]Count, error) {
	return s.countRedis(ctx, qs, false)
}

// CountChannelsRedis answers queries of channels' sets (Ref.Root 0) whose
// count, read in their channel value, is above 0, in one pipeline, a
// script each: Known false where the set is gone (hydrate).
func (s Store) CountChannelsRedis(ctx context.Context, qs []Query) ([]Count, error) {
	return s.countRedis(ctx, qs, true)
}

func (s Store) countRedis(ctx context.Context, qs []Query, channels bool) ([]Count, error) {
	cmds := make([]*redis.Cmd, len(qs))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, q := range qs {
			args := make([]any, 0, 2+len(q.Mentions))
			args = append(args, q.Read, q.Head)
			for _, m := range q.Mentions {
				args = append(args, m)
			}
			if channels {
				cmds[i] = countChannelScript.EvalSha(ctx, pipe, []string{s.RedisKey(q.Ref)}, args...)
			} else {
				cmds[i] = countScript.EvalSha(ctx, pipe, []string{s.RedisKey(q.Ref), s.CountKey(q.Ref)}, args...)
			}
		}
	}, Scripts...); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]Count, len(qs))
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("%w: counting the deletions of %s: %w", redisstore.ErrUnavailable, qs[i].Ref, err)
		}
		if n, _ := res[0].(int64); n < 0 || len(res) < 2 {
			continue
		}
		c := &out[i]
		c.Known = true
		c.Deleted, _ = res[0].(int64)
		fs, _ := res[1].(string)
		c.FirstKept, _ = strconv.ParseInt(fs, 10, 64)
		for _, r := range res[2:] {
			if q, err := strconv.ParseInt(fmt.Sprint(r), 10, 64); err == nil {
				c.DeletedMentions = append(c.DeletedMentions, q)
			}
		}
	}
	return out, nil
}

// DigestsRedis returns, per set of refs, its size and its least and
// greatest seqs (zero: no set) in one pipeline of O(log n) reads: what
// the drift sweep compares before it reads a set.
func (s Store) DigestsRedis(ctx context.Context, refs []thread.Ref) ([]channel.SetDigest, error) {
	type cmds struct {
		n      *redis.IntCmd
		lo, hi *redis.StringSliceCmd
	}
	cs := make([]cmds, len(refs))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			k := s.RedisKey(ref)
			cs[i] = cmds{pipe.ZCard(ctx, k), pipe.ZRange(ctx, k, 0, 0), pipe.ZRange(ctx, k, -1, -1)}
		}
	}); err != nil {
		return nil, err
	}
	out := make([]channel.SetDigest, len(refs))
	for i, c := range cs {
		n, err := c.n.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading the deletions of %s: %w", redisstore.ErrUnavailable, refs[i], err)
		}
		if n == 0 {
			continue
		}
		lo, hi := c.lo.Val(), c.hi.Val()
		if len(lo) == 0 || len(hi) == 0 {
			continue // gone between the reads: no set
		}
		least, err1 := strconv.ParseInt(lo[0], 10, 64)
		greatest, err2 := strconv.ParseInt(hi[0], 10, 64)
		if err1 != nil || err2 != nil {
			s.redis.SkipUndecodable()
			least, greatest = -1, -1 // never equal to a Postgres digest: read whole
		}
		out[i] = channel.SetDigest{Count: n, Least: least, Greatest: greatest}
	}
	return out, nil
}
