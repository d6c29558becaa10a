package redisstore

// A channel's deleted messages (channel.Deletions):
//
//	del:{channel}  sorted set: member and score the deleted seq (exact
//	               below 2^53, as every seq a chat assigns), kept within
//	               channel.DeletionWindow of the greatest
//	hd:{channel}   the channel value (heads.go), whose fourth part is
//	               the set's size, known once the set is hydrated from
//	               Postgres (else read Postgres, HydrateDeletions). A
//	               channel without deletions holds "0", so the unread
//	               read (one MGET of the channel values) costs it nothing
//	               more; only a channel with unread messages and
//	               deletions takes a second read (countDeletionsScript).
//
// Both keys carry the channel's hash tag: one script writes them. A
// thread's deleted replies (channel.Deletions with a root) are the same
// pair suffixed by the root, del:{channel}:root and dn:{channel}:root, in
// the channel's slot; the thread read counts them after its registers
// (DeletionCountsOf).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/thread"
)

// hydrateDeletionsChunk bounds the seqs of one hydrate script call.
const hydrateDeletionsChunk = 5000

// DeletionsKey is a channel's deleted-seq set.
func (s *Store) DeletionsKey(ch string) string { return s.prefix + "del:{" + ch + "}" }

// rootSuffix names a thread's set beside its channel's ("": the channel).
func rootSuffix(root int64) string {
	if root == 0 {
		return ""
	}
	return ":" + strconv.FormatInt(root, 10)
}

// SetDeletionsKey is the deleted-seq set of a channel (Root 0) or a
// thread.
func (s *Store) SetDeletionsKey(r thread.Ref) string {
	return s.DeletionsKey(r.Channel) + rootSuffix(r.Root)
}

// SetDeletionCountKey is the size of a thread's SetDeletionsKey (absent:
// unknown); a channel's is part of its channel value (heads.go).
func (s *Store) SetDeletionCountKey(r thread.Ref) string {
	return s.prefix + "dn:{" + r.Channel + "}" + rootSuffix(r.Root)
}

// deleteScript adds deleted seqs, trims the set to the window and, when
// the set's count is kept (hydrated) or ARGV[2] is "1" (a hydrate's last
// part), sets it. KEYS[1] = the count: a thread's count key, or the
// channel value (its fourth part) when ARGV[2] starts with "v"; KEYS[2] =
// the set; ARGV[1] = the window, ARGV[3..] = seqs. Returns the set's
// size.
var deleteScript = redis.NewScript(luaChannelValue + `
local args = {}
for i = 3, #ARGV do args[#args+1] = ARGV[i] args[#args+1] = ARGV[i] end
for i = 1, #args, 1000 do redis.call('ZADD', KEYS[2], unpack(args, i, math.min(i + 999, #args))) end
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if top[2] then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', tonumber(top[2]) - tonumber(ARGV[1])))
end
local n = redis.call('ZCARD', KEYS[2])
if ARGV[2] == 'v0' or ARGV[2] == 'v1' then
  local f = cvget(KEYS[1])
  if ARGV[2] == 'v1' or f[4] ~= '-' then
    f[4] = tostring(n)
    cvset(KEYS[1], f)
  end
elseif ARGV[2] == '1' or redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[1], n)
end
return n
`)

// countDeletionsScript is how deletions change one user's counts in a
// channel. KEYS[1] = del:{channel}; ARGV = the effective read seq, the
// head, then the user's kept mention seqs above the read. Returns {-1}
// when the set is gone (the count says it had some: hydrate), else {the
// deletions in (read, head], the first seq above the read not deleted,
// the deleted mention seqs…}. A run of deletions after the read is
// searched by halving (each step a ZCOUNT): O(log(run) log n), never a
// walk of the run, and at most 64 steps whatever the values.
var countDeletionsScript = redis.NewScript(countDeletionsBody)

// countSetDeletionsScript is countDeletionsScript for a set whose count
// is not read beforehand (a thread's): KEYS[2] = its dn key; absent, the
// set is unknown ({-1}); "0", nothing is deleted.
var countSetDeletionsScript = redis.NewScript(`
local c = redis.call('GET', KEYS[2])
if not c then return {-1} end
if c == '0' then return {0, string.format('%.0f', tonumber(ARGV[1]) + 1)} end
` + countDeletionsBody)

const countDeletionsBody = `
local z = KEYS[1]
if redis.call('EXISTS', z) == 0 then return {-1} end
local read, head = tonumber(ARGV[1]), tonumber(ARGV[2])
local lo = '(' .. ARGV[1]
local n = redis.call('ZCOUNT', z, lo, ARGV[2])
local first = read + 1
local function all(x) return redis.call('ZCOUNT', z, lo, string.format('%.0f', x)) == x - read end
if n > 0 and redis.call('ZSCORE', z, string.format('%.0f', read + 1)) then
  if all(head) then
    first = head + 1
  else
    local a, b = first, head -- all(a), not all(b)
    -- Seqs are exact doubles (at most 2^53-1, checked where they enter),
    -- so halving ends within 53 steps; the step bound keeps a value that
    -- slipped past the checks from spinning the script (and Redis).
    local steps = 0
    while b - a > 1 and steps < 64 do
      steps = steps + 1
      local mid = math.floor((a + b) / 2)
      if all(mid) then a = mid else b = mid end
    end
    first = b
  end
end
local out = {n, string.format('%.0f', first)}
for i = 3, #ARGV do
  if redis.call('ZSCORE', z, ARGV[i]) then out[#out+1] = ARGV[i] end
end
return out
`

var deletionScripts = []*redis.Script{deleteScript, countDeletionsScript, countSetDeletionsScript}

func (s *Store) queueDelete(ctx context.Context, pipe redis.Pipeliner, ref thread.Ref, seqs []int64, mark bool) *redis.Cmd {
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
		return deleteScript.EvalSha(ctx, pipe, []string{s.HeadKey(ref.Channel), s.SetDeletionsKey(ref)}, args...)
	}
	return deleteScript.EvalSha(ctx, pipe, []string{s.SetDeletionCountKey(ref), s.SetDeletionsKey(ref)}, args...)
}

// AddDeletions adds deleted seqs to their channels' sets in one pipeline
// (a union: a repeat changes nothing); errs holds one error per value.
func (s *Store) AddDeletions(ctx context.Context, ds []channel.Deletions) ([]error, error) {
	cmds := make([]*redis.Cmd, len(ds))
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, d := range ds {
			cmds[i] = s.queueDelete(ctx, pipe, thread.Ref{Channel: d.Channel, Root: d.Root}, d.Seqs, false)
		}
	})
	errs := make([]error, len(ds))
	for i, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil {
			errs[i] = fmt.Errorf("%w: deleting in %s: %w", ErrUnavailable, ds[i].Channel, cerr)
		}
	}
	return errs, err
}

// HydrateDeletions merges the durable deletions of channels (ds: those
// that have any) into their sets and marks every listed channel's count
// as kept, so later reads need not ask Postgres again.
func (s *Store) HydrateDeletions(ctx context.Context, channels []string, ds []channel.Deletions) error {
	return s.HydrateDeletionSets(ctx, channelRefs(channels), ds)
}

// HydrateDeletionSets is HydrateDeletions of sets named by refs (a
// channel's, Root 0, or a thread's).
func (s *Store) HydrateDeletionSets(ctx context.Context, refs []thread.Ref, ds []channel.Deletions) error {
	bySet := make(map[thread.Ref][]int64, len(ds))
	for _, d := range ds {
		bySet[thread.Ref{Channel: d.Channel, Root: d.Root}] = d.Seqs
	}
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, ref := range refs {
			seqs := bySet[ref]
			for len(seqs) > hydrateDeletionsChunk { // the marking part last
				s.queueDelete(ctx, pipe, ref, seqs[:hydrateDeletionsChunk], false)
				seqs = seqs[hydrateDeletionsChunk:]
			}
			s.queueDelete(ctx, pipe, ref, seqs, true)
		}
	})
	if err != nil {
		return fmt.Errorf("hydrating deletions: %w", err)
	}
	return nil
}

// HydrateDeletionPage adds one page of a set copied from Postgres in
// pages, ascending; the last page marks the set's count as kept. Live
// deletions may land between pages (a union), and until the last page
// the set reads as unknown.
func (s *Store) HydrateDeletionPage(ctx context.Context, ref thread.Ref, seqs []int64, last bool) error {
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) { s.queueDelete(ctx, pipe, ref, seqs, last) })
	if err != nil {
		return fmt.Errorf("hydrating the deletions of %s: %w", ref, err)
	}
	return nil
}

// Deletions returns, per channel, the deleted seqs Redis holds (nil: no
// set), ascending.
func (s *Store) Deletions(ctx context.Context, channels []string) ([][]int64, error) {
	return s.DeletionSets(ctx, channelRefs(channels))
}

func channelRefs(channels []string) []thread.Ref {
	refs := make([]thread.Ref, len(channels))
	for i, ch := range channels {
		refs[i].Channel = ch
	}
	return refs
}

// DeletionSets is Deletions of sets named by refs (a channel's, Root 0,
// or a thread's).
func (s *Store) DeletionSets(ctx context.Context, refs []thread.Ref) ([][]int64, error) {
	cmds := make([]*redis.StringSliceCmd, len(refs))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			cmds[i] = pipe.ZRange(ctx, s.SetDeletionsKey(ref), 0, -1)
		}
	}); err != nil {
		return nil, err
	}
	out := make([][]int64, len(refs))
	for i, cmd := range cmds {
		ms, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading the deletions of %s: %w", ErrUnavailable, refs[i], err)
		}
		for _, m := range ms {
			q, err := strconv.ParseInt(m, 10, 64)
			if err != nil || q <= 0 {
				s.skipUndecodable()
				continue
			}
			out[i] = append(out[i], q)
		}
	}
	return out, nil
}

// ScanDeletionChannels returns one SCAN page of the channels with a
// deletion set and the cursor of the next page.
func (s *Store) ScanDeletionChannels(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	return s.ScanTagged(ctx, "del:", cur, count)
}

// ScanDeletionSets returns one SCAN page of the deletion sets, channels'
// and threads' (a key whose root does not parse is skipped), and the
// cursor of the next page.
func (s *Store) ScanDeletionSets(ctx context.Context, cur ScanCursor, count int64) ([]thread.Ref, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "del:", cur, count)
	refs := make([]thread.Ref, 0, len(ids))
	for i, id := range ids {
		ref := thread.Ref{Channel: id}
		if rests[i] != "" {
			root, ok := strings.CutPrefix(rests[i], ":")
			q, perr := strconv.ParseInt(root, 10, 64)
			if !ok || perr != nil || q <= 0 {
				s.skipUndecodable()
				continue
			}
			ref.Root = q
		}
		refs = append(refs, ref)
	}
	return refs, next, err
}

// SetDeletionQuery asks how a set's deletions change one user's counts:
// the effective read seq, the head, and the user's kept mentions above
// the read.
type SetDeletionQuery struct {
	Ref        thread.Ref
	Read, Head int64
	Mentions   []int64
}

// SetDeletionCount answers a SetDeletionQuery: Known false when Redis
// does not know the set (read Postgres, HydrateDeletionSets); else the
// deletions in (read, head], the first seq above the read not deleted and
// the deleted mentions.
type SetDeletionCount struct {
	Known              bool
	Deleted, FirstKept int64
	DeletedMentions    []int64
}

// DeletionCountsOf answers queries in one pipeline (a script each).
func (s *Store) DeletionCountsOf(ctx context.Context, qs []SetDeletionQuery) ([]SetDeletionCount, error) {
	cmds := make([]*redis.Cmd, len(qs))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, q := range qs {
			args := make([]any, 0, 2+len(q.Mentions))
			args = append(args, q.Read, q.Head)
			for _, m := range q.Mentions {
				args = append(args, m)
			}
			cmds[i] = countSetDeletionsScript.EvalSha(ctx, pipe, []string{s.SetDeletionsKey(q.Ref), s.SetDeletionCountKey(q.Ref)}, args...)
		}
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]SetDeletionCount, len(qs))
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("%w: counting the deletions of %s: %w", ErrUnavailable, qs[i].Ref, err)
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

// deletionPass collects, during an unread read, the channels whose counts
// deletions may change, and those whose deletions Redis does not know.
type deletionPass struct {
	pending []pendingDeletion
	missing []string
}

type pendingDeletion struct {
	view     int // index in the views
	mentions string
}

// note reads a channel's deletion count: "", the channel's deletions are
// unknown; above 0 with unread messages, they are counted after.
func (p *deletionPass) note(views []ChannelView, d string, mentions string) {
	cv := &views[len(views)-1]
	switch {
	case d == "":
		p.missing = append(p.missing, cv.Channel)
	case d != "0" && cv.Unread > 0:
		p.pending = append(p.pending, pendingDeletion{view: len(views) - 1, mentions: mentions})
	}
}

// apply counts the pending channels' deletions (one script each, in one
// pipeline) into views.
func (s *Store) applyDeletions(ctx context.Context, views []ChannelView, p *deletionPass, mentionCap int) error {
	if len(p.pending) == 0 {
		return nil
	}
	cmds := make([]*redis.Cmd, len(p.pending))
	owns := make([]map[int64]bool, len(p.pending))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, pd := range p.pending {
			cv := &views[pd.view]
			read := cv.State.EffectiveRead().Seq
			args := []any{read, cv.Head.Seq}
			own := map[int64]bool{}
			for m := range strings.FieldsSeq(pd.mentions) {
				if q, err := parsePadded(m); err == nil && q > read {
					args, own[q] = append(args, q), true
				}
			}
			for _, q := range cv.groupSeqs { // asked once, counted in groupMentions
				if q > read && !own[q] {
					args = append(args, q)
				}
			}
			owns[i] = own
			cmds[i] = countDeletionsScript.EvalSha(ctx, pipe, []string{s.DeletionsKey(cv.Channel)}, args...)
		}
	}); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for i, pd := range p.pending {
		cv := &views[pd.view]
		res, err := cmds[i].Slice()
		if err != nil {
			return fmt.Errorf("%w: counting the deletions of %s: %w", ErrUnavailable, cv.Channel, err)
		}
		if n, _ := res[0].(int64); n < 0 || len(res) < 2 {
			p.missing = append(p.missing, cv.Channel)
			continue
		}
		n, _ := res[0].(int64)
		fs, _ := res[1].(string)
		first, _ := strconv.ParseInt(fs, 10, 64)
		cv.Unread, cv.FirstUnread = channel.AfterDeletions(cv.Unread, first, n)
		var ownDeleted int64
		for _, r := range res[2:] {
			if q, err := strconv.ParseInt(fmt.Sprint(r), 10, 64); err == nil && owns[i][q] {
				ownDeleted++
			}
		}
		cv.Mentions = max(0, cv.Mentions-ownDeleted)
		cv.MentionsCapped = cv.Mentions > int64(mentionCap)
		if cv.hasGroupMentions {
			cv.groupMentions = max(0, cv.groupMentions-int64(len(res)-2))
			cv.groupMentionsCapped = cv.groupMentions > int64(mentionCap)
		}
	}
	return nil
}

// DeletionDigests returns, per set of refs, its size and its least and
// greatest seqs (zero: no set) in one pipeline of O(log n) reads: what
// the drift sweep compares before it reads a set.
func (s *Store) DeletionDigests(ctx context.Context, refs []thread.Ref) ([]channel.SetDigest, error) {
	type cmds struct {
		n      *redis.IntCmd
		lo, hi *redis.StringSliceCmd
	}
	cs := make([]cmds, len(refs))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			k := s.SetDeletionsKey(ref)
			cs[i] = cmds{pipe.ZCard(ctx, k), pipe.ZRange(ctx, k, 0, 0), pipe.ZRange(ctx, k, -1, -1)}
		}
	}); err != nil {
		return nil, err
	}
	out := make([]channel.SetDigest, len(refs))
	for i, c := range cs {
		n, err := c.n.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading the deletions of %s: %w", ErrUnavailable, refs[i], err)
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
			s.skipUndecodable()
			least, greatest = -1, -1 // never equal to a Postgres digest: read whole
		}
		out[i] = channel.SetDigest{Count: n, Least: least, Greatest: greatest}
	}
	return out, nil
}
