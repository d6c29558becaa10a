package threads

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The tables of migration 0010: thread_heads (a max-register, like
// channel_heads) and thread_states (one row per (user, thread) holding
// thread.State). Each write is one statement per call from parameter
// arrays, rows in key order, merging by pkg/thread's rules, so
// duplicates, reordering and replays are harmless; callers dedupe per key
// first (ON CONFLICT cannot touch a row twice in one statement).
var (
	//go:embed headupsert.sql
	headUpsertSQL string
	//go:embed heads.sql
	headsSQL string
	//go:embed headfirst.sql
	headFirstSQL string
	//go:embed headpage.sql
	headPageSQL string

	//go:embed stateupsert.sql
	stateUpsertSQL string
	//go:embed states.sql
	statesSQL string
	//go:embed userstates.sql
	userStatesSQL string
	//go:embed userchannelstates.sql
	userChannelStatesSQL string
	//go:embed recentstates.sql
	recentStatesSQL string
	//go:embed statefirst.sql
	stateFirstSQL string
	//go:embed statepage.sql
	statePageSQL string
	//go:embed memberstates.sql
	memberStatesSQL string
	//go:embed erase.sql
	eraseSQL string

	//go:embed changes.sql
	changesTemplate string
	// changesSQL is the register upsert inside the change feed's
	// statement: one rule, written once.
	changesSQL = kind.ComposeSQL(strings.Replace(changesTemplate, "\n-- stateupsert.sql\n", "\n"+stateUpsertSQL, 1),
		map[string]string{"settings": settings.Table})
)

// WriteHeadsPG max-merges heads into thread_heads in one statement and
// returns how many rows changed. Heads must be unique per thread.
func (s Store) WriteHeadsPG(ctx context.Context, heads []thread.Head) (int64, error) {
	if len(heads) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(heads)
	slices.SortFunc(sorted, func(a, b thread.Head) int { return a.Ref.Compare(b.Ref) })
	n := len(sorted)
	chs, roots, seqs, msgs, times := make([]string, n), make([]int64, n), make([]int64, n), make([]string, n), make([]int64, n)
	for i, h := range sorted {
		chs[i], roots[i], seqs[i], msgs[i], times[i] = h.Channel, h.Root, h.Seq, h.MessageID, h.UpdatedAtUnixMs
	}
	tag, err := s.pg.Pool().Exec(ctx, headUpsertSQL, chs, roots, seqs, msgs, times)
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("upserting %d thread heads: %w", n, err))
	}
	return tag.RowsAffected(), nil
}

func scanHead(row pgx.CollectableRow) (thread.Head, error) {
	var h thread.Head
	err := row.Scan(&h.Channel, &h.Root, &h.Seq, &h.MessageID, &h.UpdatedAtUnixMs)
	return h, err
}

func (s Store) heads(ctx context.Context, sql string, args ...any) ([]thread.Head, error) {
	return collect(ctx, s, "thread heads", scanHead, sql, args...)
}

// HeadsPG returns the heads of the listed threads that have one, in
// thread order.
func (s Store) HeadsPG(ctx context.Context, refs []thread.Ref) ([]thread.Head, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	chs, roots := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		chs[i], roots[i] = r.Channel, r.Root
	}
	return s.heads(ctx, headsSQL, chs, roots)
}

// HeadsPagePG returns up to limit heads in thread order, after the given
// thread when hasAfter: the drift sweep's walk.
func (s Store) HeadsPagePG(ctx context.Context, after thread.Ref, hasAfter bool, limit int) ([]thread.Head, error) {
	if !hasAfter {
		return s.heads(ctx, headFirstSQL, limit)
	}
	return s.heads(ctx, headPageSQL, after.Channel, after.Root, limit)
}

// compareStates orders registers by key, the order rows are written in.
func compareStates(a, b thread.State) int { return a.Key.Compare(b.Key) }

// WriteStatesPG merges registers into thread_states in one statement, as
// Merge (the store's retention), and returns how many rows changed (inserted or moved).
// Registers must be unique per key; they are written in key order. Each
// is first merged into the empty register, as a store receiving it
// would: that raises delivered to the read seq, drops a private read that
// is not ahead, keeps the newest mentions, and leaves the device and time
// of a register without cursors empty; the conflict clause relies on it.
func (s Store) WriteStatesPG(ctx context.Context, states []thread.State) (int64, error) {
	if len(states) == 0 {
		return 0, nil
	}
	tag, err := s.pg.Pool().Exec(ctx, stateUpsertSQL, s.upsertArgs(sortedStates(states))...)
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("upserting %d thread registers: %w", len(states), err))
	}
	return tag.RowsAffected(), nil
}

func sortedStates(states []thread.State) []thread.State {
	if slices.IsSortedFunc(states, compareStates) {
		return states
	}
	sorted := slices.Clone(states)
	slices.SortFunc(sorted, compareStates)
	return sorted
}

// upsertArgs are stateupsert.sql's parameters for sorted registers, each
// first merged into the empty register (WriteStatesPG).
func (s Store) upsertArgs(sorted []thread.State) []any {
	n := len(sorted)
	users, chs, devs, rms, dms, mss := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	roots, res, rss, des, dss, pes, pss := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	times, fvs, fls := make([]int64, n), make([]int64, n), make([]bool, n)
	for i := range sorted {
		st, _ := thread.Merge(thread.State{}, sorted[i], s.mentionCap)
		c := st.Cursors
		users[i], chs[i], roots[i] = st.Key.User, st.Key.Channel, st.Key.Root
		res[i], rss[i], rms[i] = c.Read.Position.Epoch, c.Read.Position.Seq, c.Read.MessageID
		des[i], dss[i], dms[i] = c.Delivered.Position.Epoch, c.Delivered.Position.Seq, c.Delivered.MessageID
		pes[i], pss[i] = c.PrivateRead.Position.Epoch, c.PrivateRead.Position.Seq
		devs[i], times[i] = c.DeviceID, c.UpdatedAtUnixMs
		fvs[i], fls[i] = st.Follow.VersionUnixMs, st.Follow.Following
		mss[i] = int64ArrayLiteral(st.Mentions)
	}
	return []any{users, chs, roots, res, rss, rms, des, dss, dms, pes, pss, devs, times, fvs, fls, mss, s.mentionCap}
}

// int64ArrayLiteral is seqs as a Postgres array literal: unnest cannot
// take an array of arrays of different lengths, so each row's mentions
// travel as text and are cast back in the statement.
func int64ArrayLiteral(seqs []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, q := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(q, 10))
	}
	b.WriteByte('}')
	return b.String()
}

func scanState(row pgx.CollectableRow) (thread.State, error) {
	var st thread.State
	c := &st.Cursors
	err := row.Scan(&st.Key.User, &st.Key.Channel, &st.Key.Root,
		&c.Read.Position.Epoch, &c.Read.Position.Seq, &c.Read.MessageID,
		&c.Delivered.Position.Epoch, &c.Delivered.Position.Seq, &c.Delivered.MessageID,
		&c.PrivateRead.Position.Epoch, &c.PrivateRead.Position.Seq, &c.DeviceID, &c.UpdatedAtUnixMs,
		&st.Follow.VersionUnixMs, &st.Follow.Following, &st.Mentions)
	// The column keeps the greatest private position merged; the state
	// holds it only while it is ahead of the read cursor.
	st.Cursors = st.Cursors.Canonical()
	if len(st.Mentions) == 0 {
		st.Mentions = nil // as thread.Merge leaves an empty set
	}
	return st, err
}

func (s Store) states(ctx context.Context, sql string, args ...any) ([]thread.State, error) {
	return collect(ctx, s, "thread registers", scanState, sql, args...)
}

func collect[T any](ctx context.Context, s Store, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading %s: %w", what, err))
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading %s: %w", what, err))
	}
	return out, nil
}

// StatesPG returns the registers of the keys that have one (any users),
// in key order.
func (s Store) StatesPG(ctx context.Context, keys []thread.Key) ([]thread.State, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	users, chs, roots := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		users[i], chs[i], roots[i] = k.User, k.Channel, k.Root
	}
	return s.states(ctx, statesSQL, users, chs, roots)
}

// UserStatesPG returns up to limit of a user's registers, in one channel
// or all of them (channel ""), in key order.
func (s Store) UserStatesPG(ctx context.Context, user, channel string, limit int) ([]thread.State, error) {
	if channel == "" {
		return s.states(ctx, userStatesSQL, user, limit)
	}
	return s.states(ctx, userChannelStatesSQL, user, channel, limit)
}

// RecentStatesPG returns up to limit of a user's followed registers, the
// most recently active first (a restore of a user with more registers
// than Redis keeps).
func (s Store) RecentStatesPG(ctx context.Context, user string, limit int) ([]thread.State, error) {
	return s.states(ctx, recentStatesSQL, user, limit)
}

// StatesPagePG returns up to limit registers in key order, after the
// given key when hasAfter: the drift sweep's walk.
func (s Store) StatesPagePG(ctx context.Context, after thread.Key, hasAfter bool, limit int) ([]thread.State, error) {
	if !hasAfter {
		return s.states(ctx, stateFirstSQL, limit)
	}
	return s.states(ctx, statePageSQL, after.User, after.Channel, after.Root, limit)
}

// MemberStatesPG returns the registers of the listed users in one thread
// (those that have one), in user order.
func (s Store) MemberStatesPG(ctx context.Context, ref thread.Ref, users []string) ([]thread.State, error) {
	if len(users) == 0 {
		return nil, nil
	}
	return s.states(ctx, memberStatesSQL, users, ref.Channel, ref.Root)
}
