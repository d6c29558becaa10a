package readby

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// The channel view: every member's PUBLIC read and delivered cursor of a
// channel, as others may see them, beside a bounded stream of their
// moves. All keys carry the {channel} hash tag (one slot with the
// channel's membership hash cm:{channel}, which a move is checked
// against):
//
//	cv:{C}:cur     hash: "r:<user>" / "d:<user>" → "epoch:seq:at_unix_ms"
//	               (decimal), the member's public read / delivered cursor
//	cv:{C}:r       zset: user → public read seq (ZCOUNT counts, the
//	cv:{C}:d       zset: user → delivered seq    least gives the watermark)
//	cv:{C}:s       stream of moves, MAXLEN ~ (default 10,000), fields
//	               u user, k "r"|"d", e epoch, s seq, t at_unix_ms; and
//	               of removals (Remove, an erasure): u, k, rm "1", t;
//	               and of thread moves (threads.go)
//	cv:{C}:loaded  string, set with a TTL when the view was last rebuilt
//	               from Postgres (State.Loaded)
//
// Only moves others may see enter it: never a private read, never a side
// the user does not share (privacy settings), never a user the channel's
// membership register says has left or, once the membership hash is
// complete, a user who holds no register in it (a mark of an untracked
// channel or an allowed non-member's mark). A move enters only when its
// (epoch, seq) is greater than the stored one, so duplicates and
// reordering are no-ops and the stream holds each move once.

// Side is which of a member's two public cursors a view entry is.
type Side string

const (
	// Read is the public read cursor.
	Read Side = "r"
	// Delivered is the delivered cursor.
	Delivered Side = "d"

	// StreamMaxLenDefault bounds each channel's move stream (trimmed
	// approximately).
	StreamMaxLenDefault = 10000
	// chunk bounds the moves of one script call.
	chunk = 500
)

var (
	//go:embed apply.lua
	luaApply string
	//go:embed remove.lua
	luaRemove string
	//go:embed read.lua
	luaRead string
	//go:embed count.lua
	luaCount string

	applyScript  = redis.NewScript(redisstore.LuaCmp + luaApply)
	removeScript = redis.NewScript(luaRemove)
	readScript   = redis.NewScript(luaRead)
	countScript  = redis.NewScript(luaCount)

	// Scripts are the view's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{applyScript, removeScript, readScript, countScript, eraseScript}
)

// Store is the view's storage over the two drivers. It is two pointers:
// make one where it is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
}

// NewStore is the view's storage on pg and rs (either may be nil when
// the caller uses only the other).
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store { return Store{pg: pg, redis: rs} }

func (s Store) key(ch, part string) string { return s.redis.Prefix() + "cv:{" + ch + "}:" + part }

// CurKey is a channel view's cursor hash.
func (s Store) CurKey(ch string) string { return s.key(ch, "cur") }

// ZSetKey is a channel view's sorted set of one side.
func (s Store) ZSetKey(ch string, side Side) string { return s.key(ch, string(side)) }

// StreamKey is a channel view's move stream.
func (s Store) StreamKey(ch string) string { return s.key(ch, "s") }

// LoadedKey marks a channel view as recently rebuilt from Postgres.
func (s Store) LoadedKey(ch string) string { return s.key(ch, "loaded") }

// ErasedKeys are the keys of ch's view an erasure cleans a user out of
// (redisstore.Store.Erase, in its script of the channel): cur, r, d,
// stream.
func (s Store) ErasedKeys(ch string) []string {
	return []string{s.CurKey(ch), s.ZSetKey(ch, Read), s.ZSetKey(ch, Delivered), s.StreamKey(ch)}
}

// exec runs a pipeline of the view's scripts (loaded again when Redis
// lost them).
func (s Store) exec(ctx context.Context, build func(redis.Pipeliner)) error {
	_, err := s.redis.Exec(ctx, build, Scripts...)
	return err
}

// Move is one public cursor move of a member in a channel.
type Move struct {
	Channel  string
	User     string
	Side     Side
	Position receipt.Position
	AtUnixMs int64
}

// Apply applies public cursor moves to their channels' views, one script
// per channel (and chunk) in one pipeline, streaming each move that
// advanced (streamMaxLen > 0; ≤ 0 uses the default). It returns, per
// move, the stream id of its entry, "" when it changed nothing.
func (s Store) Apply(ctx context.Context, moves []Move, streamMaxLen int64) ([]string, error) {
	if streamMaxLen <= 0 {
		streamMaxLen = StreamMaxLenDefault
	}
	return s.apply(ctx, moves, strconv.FormatInt(streamMaxLen, 10))
}

// Rebuild merges cursors read from Postgres into channel views without
// streaming them (watchers of a rebuilt view get a snapshot anyway), and
// marks the channels loaded for ttl.
func (s Store) Rebuild(ctx context.Context, channels []string, moves []Move, ttl time.Duration) error {
	if _, err := s.apply(ctx, moves, "0"); err != nil {
		return err
	}
	return s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, ch := range channels {
			pipe.Set(ctx, s.LoadedKey(ch), "1", ttl)
		}
	})
}

func (s Store) apply(ctx context.Context, moves []Move, maxLen string) ([]string, error) {
	out := make([]string, len(moves))
	byChannel := map[string][]int{}
	var order []string
	for i, m := range moves {
		if m.Side != Read && m.Side != Delivered {
			return nil, fmt.Errorf("channel view: unknown side %q", m.Side)
		}
		if _, ok := byChannel[m.Channel]; !ok {
			order = append(order, m.Channel)
		}
		byChannel[m.Channel] = append(byChannel[m.Channel], i)
	}
	type call struct {
		cmd *redis.Cmd
		idx []int
	}
	var calls []call
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		calls = calls[:0]
		for _, ch := range order {
			keys := append(s.ErasedKeys(ch), members.NewStore(nil, s.redis).ChannelMembersKey(ch))
			idx := byChannel[ch]
			for start := 0; start < len(idx); start += chunk {
				part := idx[start:min(start+chunk, len(idx))]
				argv := make([]any, 0, 1+5*len(part))
				argv = append(argv, maxLen)
				for _, i := range part {
					m := moves[i]
					argv = append(argv, m.User, string(m.Side), strconv.FormatInt(m.Position.Epoch, 10),
						strconv.FormatInt(m.Position.Seq, 10), strconv.FormatInt(m.AtUnixMs, 10))
				}
				calls = append(calls, call{applyScript.EvalSha(ctx, pipe, keys, argv...), part})
			}
		}
	}); err != nil {
		return nil, err
	}
	for _, c := range calls {
		ids, err := c.cmd.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("%w: applying channel view moves: %w", redisstore.ErrUnavailable, err)
		}
		for j, i := range c.idx {
			if j < len(ids) && ids[j] != "-" {
				out[i] = ids[j]
			}
		}
	}
	return out, nil
}

// Remove takes users' cursors of the given sides out of a channel's view
// (a leave, or a user who stopped sharing a side) and streams a removal
// entry for each cursor it took out (none for one that was not there),
// so that watchers stop showing it.
func (s Store) Remove(ctx context.Context, ch string, users []string, sides ...Side) error {
	if len(users) == 0 || len(sides) == 0 {
		return nil
	}
	var ks strings.Builder
	for _, k := range sides {
		if k != Read && k != Delivered {
			return fmt.Errorf("channel view: unknown side %q", k)
		}
		ks.WriteString(string(k))
	}
	argv := make([]any, 0, 2+len(users))
	argv = append(argv, strconv.FormatInt(time.Now().UnixMilli(), 10), ks.String())
	for _, u := range users {
		argv = append(argv, u)
	}
	var cmd *redis.Cmd
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		cmd = removeScript.EvalSha(ctx, pipe, s.ErasedKeys(ch), argv...)
	}); err != nil {
		return err
	}
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("%w: removing from the view of %s: %w", redisstore.ErrUnavailable, ch, err)
	}
	return nil
}

// Cursor is one member's public cursor in a channel view.
type Cursor struct {
	Position receipt.Position
	AtUnixMs int64
}

// State is a channel's view read in one atomic script.
type State struct {
	Channel string
	// Read and Delivered are the members' public cursors by user.
	Read, Delivered map[string]Cursor
	// LastID is the stream's last entry id ("" when the stream is empty):
	// a watcher that starts from it after this snapshot misses nothing.
	LastID string
	// Loaded is true while the view is marked rebuilt from Postgres.
	Loaded bool
	// CursorsLeftOut: the view held more cursors than the read asked for
	// (ReadUpTo), so Read and Delivered are empty.
	CursorsLeftOut bool
}

// ReadAll reads channels' views, each atomically (cursors and the
// stream's last id at one instant), in one pipeline.
func (s Store) ReadAll(ctx context.Context, channels []string) ([]State, error) {
	return s.ReadUpTo(ctx, channels, -1)
}

// ReadUpTo is ReadAll reading the cursors of a channel only when its
// view holds at most maxMembers members' worth (two sides each; 0:
// never): a large channel's view answers its stream id and loaded mark
// with CursorsLeftOut, without its members' state crossing the wire.
func (s Store) ReadUpTo(ctx context.Context, channels []string, maxMembers int) ([]State, error) {
	most := "-1"
	if maxMembers >= 0 {
		most = strconv.Itoa(2 * maxMembers)
	}
	cmds := make([]*redis.Cmd, len(channels))
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cmds[i] = readScript.EvalSha(ctx, pipe, []string{s.CurKey(ch), s.StreamKey(ch), s.LoadedKey(ch)}, most)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]State, len(channels))
	for i, ch := range channels {
		res, err := cmds[i].Slice()
		if err != nil || len(res) != 4 {
			return nil, fmt.Errorf("%w: reading the view of %s: %w", redisstore.ErrUnavailable, ch, err)
		}
		v := State{Channel: ch, Read: map[string]Cursor{}, Delivered: map[string]Cursor{}}
		flat, _ := res[0].([]any)
		for j := 0; j+1 < len(flat); j += 2 {
			f, _ := flat[j].(string)
			val, _ := flat[j+1].(string)
			side, user, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			c, err := ParseCursor(val)
			if err != nil {
				return nil, fmt.Errorf("channel view %s field %s: %w", ch, f, err)
			}
			switch Side(side) {
			case Read:
				v.Read[user] = c
			case Delivered:
				v.Delivered[user] = c
			}
		}
		v.LastID, _ = res[1].(string)
		n, _ := res[2].(int64)
		v.Loaded = n == 1
		left, _ := res[3].(int64)
		v.CursorsLeftOut = left == 1
		out[i] = v
	}
	return out, nil
}

// ParseCursor parses a cursor hash value "epoch:seq:at_unix_ms".
func ParseCursor(v string) (Cursor, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("cursor %q: want epoch:seq:at_unix_ms", v)
	}
	var n [3]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return Cursor{}, fmt.Errorf("cursor %q: %w", v, err)
		}
		n[i] = x
	}
	return Cursor{Position: receipt.Position{Epoch: n[0], Seq: n[1]}, AtUnixMs: n[2]}, nil
}

// Counts are a channel's aggregate counts from its view's sorted sets.
type Counts struct {
	// Read and Delivered count the view's members at or past the seq.
	Read, Delivered int64
	// ReadMembers and DeliveredMembers are the sets' sizes; LeastRead
	// and LeastDelivered their least seqs (0 when empty).
	ReadMembers, DeliveredMembers int64
	LeastRead, LeastDelivered     int64
}

// Count counts a channel's view at seq (ZCOUNT), leaving out one user
// (the sender) when excluded is not empty.
func (s Store) Count(ctx context.Context, ch string, seq int64, excluded string) (Counts, error) {
	var cmd *redis.Cmd
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		cmd = countScript.EvalSha(ctx, pipe, []string{s.ZSetKey(ch, Read), s.ZSetKey(ch, Delivered)},
			strconv.FormatInt(seq, 10), excluded)
	}); err != nil {
		return Counts{}, err
	}
	n, err := cmd.Int64Slice()
	if err == nil && len(n) != 6 {
		err = errors.New("short answer")
	}
	if err != nil {
		return Counts{}, fmt.Errorf("%w: counting the view of %s: %w", redisstore.ErrUnavailable, ch, err)
	}
	return Counts{Read: n[0], Delivered: n[1], ReadMembers: n[2], DeliveredMembers: n[3], LeastRead: n[4], LeastDelivered: n[5]}, nil
}
