package drift

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// The sweep of the channel state: heads, membership registers
// and mention sets, each walked in Postgres pages and in Redis SCAN pages
// like the cursors, compared by its merge rule, and repaired both ways
// with it (a head's max, the greater register, the union of mentions kept
// to the newest cap+1), so a repair can never move anything backwards.
// Redis ahead within the grace period is in flight, not drift: heads and
// registers carry their time; mention sets carry none, so a Redis set
// ahead of Postgres is copied at once (a set union: harmless even when
// the persister is about to write the same seqs).

// Kinds of state, the keys of Report.ByKind.
const (
	KindCursors  = "cursors"
	KindHeads    = "heads"
	KindMembers  = "members"
	KindMentions = "mentions"
)

// chanWork is the work found in one page of channel state.
type chanWork struct {
	kind     string
	found    Counts
	inFlight int

	headsPG, headsRedis         []channel.Head
	headsPGDir, headsRedisDir   []string
	regsPG, regsRedis           []channel.Membership
	regsPGDir, regsRedisDir     []string
	mentionsPG, mentionsRedis   []channel.Mentions
	mentionsPGDir, mentionsRdir []string
}

func (s *Sweeper) graceOver(ms int64) bool {
	return s.cfg.Grace < 0 || ms <= 0 || s.now().Sub(time.UnixMilli(ms)) >= s.cfg.Grace
}

func (s *Sweeper) mentionCap() int {
	if s.cfg.MentionCap > 0 {
		return s.cfg.MentionCap
	}
	return channel.MentionCapDefault
}

// compareHead classifies one channel's head in both stores (nil: absent).
// A Redis head of seq 0 records "no head yet" and is never drift.
func (s *Sweeper) compareHead(w *chanWork, pg, rd *channel.Head) {
	switch {
	case pg != nil && (rd == nil || pg.Seq > rd.Seq):
		dir := DirPostgresAhead
		if rd == nil {
			dir = DirRedisMissing
		}
		w.found.add(dir, 1)
		w.headsRedis, w.headsRedisDir = append(w.headsRedis, *pg), append(w.headsRedisDir, dir)
	case rd != nil && rd.Seq > 0 && (pg == nil || rd.Seq > pg.Seq):
		if !s.graceOver(rd.UpdatedAtUnixMs) {
			w.inFlight++
			return
		}
		dir := DirRedisAhead
		if pg == nil {
			dir = DirPostgresMissing
		}
		w.found.add(dir, 1)
		w.headsPG, w.headsPGDir = append(w.headsPG, *rd), append(w.headsPGDir, dir)
	}
}

// compareRegister classifies one key's register in Postgres and in the
// Redis hashes (the user's and, when read, the channel's).
func (s *Sweeper) compareRegister(w *chanWork, pg *channel.Membership, rds ...*channel.Membership) {
	var merged channel.Membership
	present := false
	for _, r := range append([]*channel.Membership{pg}, rds...) {
		if r != nil {
			merged, _ = channel.MergeMembership(merged, *r)
			present = true
		}
	}
	if !present {
		return
	}
	redisAhead := pg == nil || merged.Compare(*pg) > 0
	if redisAhead && !s.graceOver(merged.VersionUnixMs) {
		w.inFlight++
		return
	}
	if redisAhead {
		dir := DirRedisAhead
		if pg == nil {
			dir = DirPostgresMissing
		}
		w.found.add(dir, 1)
		w.regsPG, w.regsPGDir = append(w.regsPG, merged), append(w.regsPGDir, dir)
	}
	for _, r := range rds {
		if r == nil || merged.Compare(*r) > 0 {
			dir := DirPostgresAhead
			if r == nil {
				dir = DirRedisMissing
			}
			if redisAhead {
				dir = DirRedisAhead // one Redis hash ahead of the other: the merge brings both along
			}
			w.found.add(dir, 1)
			w.regsRedis, w.regsRedisDir = append(w.regsRedis, merged), append(w.regsRedisDir, dir)
			return
		}
	}
}

// compareMentions classifies one key's mention sets (nil: absent).
func (s *Sweeper) compareMentions(w *chanWork, k receipt.Key, pg, rd []int64) {
	u := channel.MergeMentions(pg, rd, s.mentionCap())
	if !slices.Equal(u, rd) {
		dir := DirPostgresAhead
		if rd == nil {
			dir = DirRedisMissing
		}
		w.found.add(dir, 1)
		w.mentionsRedis, w.mentionsRdir = append(w.mentionsRedis, channel.Mentions{Key: k, Seqs: u}), append(w.mentionsRdir, dir)
	}
	if !slices.Equal(u, pg) {
		dir := DirRedisAhead
		if pg == nil {
			dir = DirPostgresMissing
		}
		w.found.add(dir, 1)
		w.mentionsPG, w.mentionsPGDir = append(w.mentionsPG, channel.Mentions{Key: k, Seqs: u}), append(w.mentionsPGDir, dir)
	}
}

// sweepChannels runs the channel-state passes and the settings',
// each both ways.
func (s *Sweeper) sweepChannels(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	for _, pass := range []func(context.Context, *rate.Limiter, *Report) error{
		s.sweepHeadsPG, s.sweepHeadsRedis, s.sweepMembersPG, s.sweepMembersRedis, s.sweepMentionsPG, s.sweepMentionsRedis,
		s.sweepSettingsPG, s.sweepSettingsRedis,
	} {
		if err := pass(ctx, lim, rep); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sweeper) sweepHeadsPG(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	after := ""
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := s.cfg.Postgres.HeadsPage(ctx, after, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("reading postgres heads after %q: %w", after, err)
		}
		rep.Pages++
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Channel
		if err := s.compareHeads(ctx, rep, page, nil); err != nil {
			return err
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
	}
}

func (s *Sweeper) sweepHeadsRedis(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		chs, next, err := s.cfg.Redis.ScanChannels(ctx, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis channels: %w", err)
		}
		rep.Pages++
		valid := scannedIDs("channel_id", chs, rep)
		if len(valid) > 0 {
			pg, err := s.cfg.Postgres.Heads(ctx, valid)
			if err != nil {
				return fmt.Errorf("reading postgres heads: %w", err)
			}
			if err := s.compareHeads(ctx, rep, pg, valid); err != nil {
				return err
			}
		}
		if cursor = next; cursor.Done() {
			return nil
		}
	}
}

// compareHeads compares the Postgres heads of a page (and, from the Redis
// walk, the channels it found) with Redis and applies the repairs.
func (s *Sweeper) compareHeads(ctx context.Context, rep *Report, pg []channel.Head, redisChannels []string) error {
	byCh := map[string]*channel.Head{}
	chs := slices.Clone(redisChannels)
	for i := range pg {
		byCh[pg[i].Channel] = &pg[i]
		if redisChannels == nil {
			chs = append(chs, pg[i].Channel)
		}
	}
	rd, err := s.cfg.Redis.Heads(ctx, chs)
	if err != nil {
		return fmt.Errorf("reading redis heads: %w", err)
	}
	w := &chanWork{kind: KindHeads}
	for _, ch := range chs {
		var r *channel.Head
		if h, ok := rd[ch]; ok {
			r = &h
		}
		if redisChannels != nil && (r == nil || byCh[ch] != nil) {
			continue // gone since the scan, or in both stores: the Postgres walk compared it
		}
		s.compareHead(w, byCh[ch], r)
	}
	return s.applyChannels(ctx, w, rep)
}

func (s *Sweeper) sweepMembersPG(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var after receipt.Key
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := s.cfg.Postgres.MembersPage(ctx, after, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("reading postgres members after %q: %w", after.KafkaKey(), err)
		}
		rep.Pages++
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Key
		if err := s.compareMembers(ctx, rep, page); err != nil {
			return err
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
	}
}

// compareMembers compares a page of Postgres registers with both Redis
// hashes (one pipelined lookup) and applies the repairs.
func (s *Sweeper) compareMembers(ctx context.Context, rep *Report, pg []channel.Membership) error {
	keys := make([]receipt.Key, len(pg))
	for i, m := range pg {
		keys[i] = m.Key
	}
	um, cm, err := s.cfg.Redis.RegistersOf(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading redis memberships: %w", err)
	}
	w := &chanWork{kind: KindMembers}
	for i := range pg {
		s.compareRegister(w, &pg[i], um[i], cm[i])
	}
	return s.applyChannels(ctx, w, rep)
}

func (s *Sweeper) sweepMembersRedis(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		users, next, err := s.cfg.Redis.ScanMembershipUsers(ctx, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis memberships: %w", err)
		}
		rep.Pages++
		slices.Sort(users)
		users = slices.Compact(users)
		w := &chanWork{kind: KindMembers}
		for _, user := range users {
			if receipt.ValidateID("user_id", user) != nil {
				rep.Invalid++
				continue
			}
			rd, _, err := s.cfg.Redis.Memberships(ctx, user, nil)
			if err != nil {
				return fmt.Errorf("reading redis memberships of %s: %w", user, err)
			}
			inPG := map[string]*channel.Membership{}
			for start := 0; start < len(rd); start += pgGetChunk {
				part := rd[start:min(start+pgGetChunk, len(rd))]
				chs := make([]string, len(part))
				for i, m := range part {
					chs[i] = m.Key.Channel
				}
				rows, err := s.cfg.Postgres.Memberships(ctx, user, chs)
				if err != nil {
					return fmt.Errorf("reading postgres memberships of %s: %w", user, err)
				}
				for i := range rows {
					inPG[rows[i].Key.Channel] = &rows[i]
				}
			}
			for i := range rd {
				if rd[i].Validate() != nil {
					rep.Invalid++
					continue
				}
				if pg := inPG[rd[i].Key.Channel]; pg == nil {
					s.compareRegister(w, nil, &rd[i])
				}
				// Keys in both stores were compared by the Postgres walk.
			}
		}
		if err := s.applyChannels(ctx, w, rep); err != nil {
			return err
		}
		if cursor = next; cursor.Done() {
			return nil
		}
	}
}

func (s *Sweeper) sweepMentionsPG(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var after receipt.Key
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := s.cfg.Postgres.MentionsPage(ctx, after, s.cfg.PageSize, s.mentionCap())
		if err != nil {
			return fmt.Errorf("reading postgres mentions after %q: %w", after.KafkaKey(), err)
		}
		rep.Pages++
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Key
		keys := make([]receipt.Key, len(page))
		for i, m := range page {
			keys[i] = m.Key
		}
		rd, err := s.cfg.Redis.MentionSeqs(ctx, keys)
		if err != nil {
			return fmt.Errorf("reading redis mentions: %w", err)
		}
		w := &chanWork{kind: KindMentions}
		for i, m := range page {
			s.compareMentions(w, m.Key, m.Seqs, rd[i])
		}
		if err := s.applyChannels(ctx, w, rep); err != nil {
			return err
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
	}
}

func (s *Sweeper) sweepMentionsRedis(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		keys, next, err := s.cfg.Redis.ScanMentionKeys(ctx, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis mentions: %w", err)
		}
		rep.Pages++
		slices.SortFunc(keys, receipt.Key.Compare)
		keys = slices.Compact(keys)
		valid := keys[:0]
		for _, k := range keys {
			if receipt.ValidateID("user_id", k.User) != nil || receipt.ValidateID("channel_id", k.Channel) != nil {
				rep.Invalid++
				continue
			}
			valid = append(valid, k)
		}
		rd, err := s.cfg.Redis.MentionSeqs(ctx, valid)
		if err != nil {
			return fmt.Errorf("reading redis mentions: %w", err)
		}
		byUser := map[string][]string{}
		for _, k := range valid {
			byUser[k.User] = append(byUser[k.User], k.Channel)
		}
		inPG := map[receipt.Key][]int64{}
		for user, chs := range byUser {
			rows, err := s.cfg.Postgres.Mentions(ctx, user, chs, s.mentionCap())
			if err != nil {
				return fmt.Errorf("reading postgres mentions of %s: %w", user, err)
			}
			for _, m := range rows {
				inPG[m.Key] = m.Seqs
			}
		}
		w := &chanWork{kind: KindMentions}
		for i, k := range valid {
			if _, ok := inPG[k]; !ok && rd[i] != nil {
				s.compareMentions(w, k, nil, rd[i]) // keys in both: the Postgres walk
			}
		}
		if err := s.applyChannels(ctx, w, rep); err != nil {
			return err
		}
		if cursor = next; cursor.Done() {
			return nil
		}
	}
}

// applyChannels writes a page's repairs, each a merge, and counts them.
func (s *Sweeper) applyChannels(ctx context.Context, w *chanWork, rep *Report) error {
	rep.Found.merge(w.found)
	rep.byKind(w.kind).merge(w.found)
	rep.InFlight += w.inFlight
	s.m.inFlight.Add(float64(w.inFlight))
	erased, err := s.dropErasedChannelState(ctx, w)
	if err != nil {
		return fmt.Errorf("reading the tombstones of a page: %w", err)
	}
	rep.Erased += erased
	for _, d := range []string{DirRedisAhead, DirPostgresAhead, DirRedisMissing, DirPostgresMissing} {
		if n := countDir(w.found, d); n > 0 {
			s.m.found.WithLabelValues(d).Add(float64(n))
		}
	}
	pgWrite := func(what string, n int, dirs []string, write func() error) error {
		if n == 0 {
			return nil
		}
		if err := write(); err != nil {
			rep.Failed += n
			if pgstore.Classify(err) == errclass.Rejected {
				s.log.Warn("repairing postgres "+what+": rejected", zap.Int("num_rows", n), zap.Error(err))
				return nil
			}
			return fmt.Errorf("repairing %d postgres %s: %w", n, what, err)
		}
		for _, d := range dirs {
			s.repaired(rep, d)
		}
		return nil
	}
	redisWrite := func(what string, n int, dirs []string, write func() error) error {
		if n == 0 {
			return nil
		}
		if err := write(); err != nil {
			rep.Failed += n
			return fmt.Errorf("repairing %d redis %s: %w", n, what, err)
		}
		for _, d := range dirs {
			s.repaired(rep, d)
		}
		return nil
	}
	mcap := s.mentionCap()
	steps := []error{
		pgWrite("heads", len(w.headsPG), w.headsPGDir, func() error { _, err := s.cfg.Postgres.UpsertHeads(ctx, w.headsPG); return err }),
		redisWrite("heads", len(w.headsRedis), w.headsRedisDir, func() error {
			res, err := s.cfg.Redis.RaiseHeads(ctx, w.headsRedis)
			return firstErr(err, res, func(r redisstore.HeadResult) error { return r.Err })
		}),
		pgWrite("members", len(w.regsPG), w.regsPGDir, func() error { _, err := s.cfg.Postgres.UpsertMembers(ctx, dedupeRegs(w.regsPG)); return err }),
		redisWrite("members", len(w.regsRedis), w.regsRedisDir, func() error {
			res, err := s.cfg.Redis.MergeMemberships(ctx, w.regsRedis)
			return firstErr(err, res, func(r redisstore.MembershipResult) error { return r.Err })
		}),
		pgWrite("mentions", len(w.mentionsPG), w.mentionsPGDir, func() error {
			if _, err := s.cfg.Postgres.InsertMentions(ctx, w.mentionsPG); err != nil {
				return err
			}
			keys := make([]receipt.Key, len(w.mentionsPG))
			for i, m := range w.mentionsPG {
				keys[i] = m.Key
			}
			_, err := s.cfg.Postgres.TrimMentions(ctx, keys, mcap)
			return err
		}),
		redisWrite("mentions", len(w.mentionsRedis), w.mentionsRdir, func() error { return s.cfg.Redis.AddMentions(ctx, w.mentionsRedis, mcap) }),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}

func firstErr[T any](err error, res []T, errOf func(T) error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if e := errOf(r); e != nil {
			return e
		}
	}
	return nil
}

// dedupeRegs keeps one register per key (the greatest): a page may find
// one key twice (from the user's and the channel's hash).
func dedupeRegs(regs []channel.Membership) []channel.Membership {
	by := map[receipt.Key]channel.Membership{}
	for _, m := range regs {
		by[m.Key], _ = channel.MergeMembership(by[m.Key], m)
	}
	out := make([]channel.Membership, 0, len(by))
	for _, m := range by {
		out = append(out, m)
	}
	return out
}

// byKind returns the kind's counts, created on first use.
func (r *Report) byKind(kind string) *Counts {
	if r.ByKind == nil {
		r.ByKind = map[string]*Counts{}
	}
	c := r.ByKind[kind]
	if c == nil {
		c = &Counts{}
		r.ByKind[kind] = c
	}
	return c
}

// pageWait waits for the page rate and, with leader election, checks that
// this replica still leads (as the cursor walks do before every page).
func (s *Sweeper) pageWait(ctx context.Context, lim *rate.Limiter) error {
	if err := lim.Wait(ctx); err != nil {
		return err
	}
	return s.checkGuard(ctx)
}

// scannedIDs dedupes one SCAN page of ids (SCAN may return one more than
// once) and keeps the valid ones, counting the others in rep.Invalid.
func scannedIDs(field string, ids []string, rep *Report) []string {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	valid := ids[:0]
	for _, id := range ids {
		if receipt.ValidateID(field, id) != nil {
			rep.Invalid++
			continue
		}
		valid = append(valid, id)
	}
	return valid
}
