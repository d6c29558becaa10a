package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// The channel view: every member's PUBLIC read and delivered
// cursor of a channel, as others may see them, beside a bounded stream of
// their moves. All keys carry the {channel} hash tag (one slot with the
// channel's membership hash cm:{channel}):
//
//	cv:{C}:cur     hash: "r:<user>" / "d:<user>" → "epoch:seq:at_unix_ms"
//	               (decimal), the member's public read / delivered cursor
//	cv:{C}:r       zset: user → public read seq (ZCOUNT counts, the
//	cv:{C}:d       zset: user → delivered seq    least gives the watermark)
//	cv:{C}:s       stream of moves, MAXLEN ~ (default 10,000), fields
//	               u user, k "r"|"d", e epoch, s seq, t at_unix_ms; and
//	               of removals (RemoveFromView, Erase): u, k, rm "1", t;
//	               and of thread moves (threadview.go)
//	cv:{C}:loaded  string, set with a TTL when the view was last rebuilt
//	               from Postgres (see ViewLoaded)
//
// Only moves others may see enter it: never a private read, never a kind
// the user does not share (privacy settings), never a user the channel's
// membership register says has left or, once the membership hash is
// complete, a user who holds no register in it (a mark of an untracked
// channel or an allowed non-member's mark). A move enters only when its (epoch,
// seq) is greater than the stored one, so duplicates and reordering are
// no-ops and the stream holds each move once.

// ViewKind is the kind of a public cursor in the channel view.
type ViewKind string

const (
	// ViewRead is the public read cursor.
	ViewRead ViewKind = "r"
	// ViewDelivered is the delivered cursor.
	ViewDelivered ViewKind = "d"

	// ViewStreamMaxLenDefault bounds each channel's move stream (trimmed
	// approximately).
	ViewStreamMaxLenDefault = 10000
	// viewChunk bounds the moves of one script call.
	viewChunk = 500
)

// ViewCurKey is a channel view's cursor hash.
func (s *Store) ViewCurKey(ch string) string { return s.prefix + "cv:{" + ch + "}:cur" }

// ViewZSetKey is a channel view's sorted set of one kind.
func (s *Store) ViewZSetKey(ch string, k ViewKind) string {
	return s.prefix + "cv:{" + ch + "}:" + string(k)
}

// ViewStreamKey is a channel view's move stream.
func (s *Store) ViewStreamKey(ch string) string { return s.prefix + "cv:{" + ch + "}:s" }

// ViewLoadedKey marks a channel view as recently rebuilt from Postgres.
func (s *Store) ViewLoadedKey(ch string) string { return s.prefix + "cv:{" + ch + "}:loaded" }

func (s *Store) viewKeys(ch string) []string {
	return []string{s.ViewCurKey(ch), s.ViewZSetKey(ch, ViewRead), s.ViewZSetKey(ch, ViewDelivered),
		s.ViewStreamKey(ch), s.ChannelMembersKey(ch)}
}

// ViewMove is one public cursor move of a member in a channel.
type ViewMove struct {
	Channel  string
	User     string
	Kind     ViewKind
	Position receipt.Position
	AtUnixMs int64
}

const luaViewCmp = `
local function cmp(a, b)
  if a == b then return 0 end
  if #a ~= #b then if #a < #b then return -1 else return 1 end end
  if a < b then return -1 end
  return 1
end
`

// viewApplyScript applies a channel's moves: those of members, and while
// the membership hash is not complete (never hydrated, or lost with Redis)
// those of users it holds no register of, who may be members. A user who
// left, or who has no register in a complete hash, is never shown (read-by
// and ticks list members only), so their moves would only cost a write.
// KEYS = cur, r, d, stream, cm;
// ARGV[1] = the stream's MAXLEN ("0": do not append, for rebuilds), then
// user, kind, epoch, seq, at per move (decimal, no leading zeros, so the
// longer numeral is the greater and equal lengths compare bytewise; digits
// only, so the byte order is the same in every locale). Returns one stream
// id per move ("" when the move changed nothing, or was not streamed).
var viewApplyScript = redis.NewScript(luaViewCmp + `
local out = {}
local complete = redis.call('HEXISTS', KEYS[5], ':loaded') == 1
if complete and redis.call('HLEN', KEYS[5]) == 1 + redis.call('HEXISTS', KEYS[5], ':n') then
  -- no registers: an untracked channel, whose view stays empty
  for i = 2, #ARGV, 5 do out[#out+1] = "" end
  return out
end
for i = 2, #ARGV, 5 do
  local u, k, e, s, t = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  local id = ""
  local reg = redis.call('HGET', KEYS[5], u)
  if (reg and string.sub(reg, 1, 1) == "1") or (not reg and not complete) then
    local f = k .. ":" .. u
    local cur = redis.call('HGET', KEYS[1], f)
    local adv = true
    if cur then
      local a = string.find(cur, ":", 1, true)
      local b = string.find(cur, ":", a + 1, true)
      -- by (seq, epoch), as the public read merges (receipt.Merge);
      -- delivered's epoch is always 0
      local c = cmp(s, string.sub(cur, a + 1, b - 1))
      if c == 0 then c = cmp(e, string.sub(cur, 1, a - 1)) end
      adv = c > 0
    end
    if adv then
      redis.call('HSET', KEYS[1], f, e .. ":" .. s .. ":" .. t)
      local z = KEYS[2]
      if k == "d" then z = KEYS[3] end
      redis.call('ZADD', z, s, u)
      if ARGV[1] ~= "0" then
        id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[1], '*', 'u', u, 'k', k, 'e', e, 's', s, 't', t)
      else
        id = "-"
      end
    end
  end
  out[#out+1] = id
end
return out
`)

var viewScripts = []*redis.Script{viewApplyScript, viewReadScript, viewCountScript, viewRemoveScript}

// UntrackedChannels reports which of channels Redis knows to have no
// membership registers at all (their membership hash is complete and
// holds none): their views stay empty (viewApplyScript), so the gateway
// need not build their moves. Read after a merge, it is safe to act on: a
// join registers its member before it publishes the cursors the member
// holds, which include the merge.
func (s *Store) UntrackedChannels(ctx context.Context, channels []string) (map[string]bool, error) {
	type probe struct {
		markers *redis.SliceCmd
		size    *redis.IntCmd
	}
	probes := make([]probe, len(channels))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cm := s.ChannelMembersKey(ch)
			probes[i] = probe{pipe.HMGet(ctx, cm, loadedField, countField), pipe.HLen(ctx, cm)}
		}
	}); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(channels))
	for i, ch := range channels {
		markers, err := probes[i].markers.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if markers[0] == nil {
			continue // not complete: it may have members Redis lost
		}
		n := int64(1)
		if markers[1] != nil {
			n++
		}
		out[ch] = probes[i].size.Val() == n
	}
	return out, nil
}

// ApplyViewMoves applies public cursor moves to their channels' views, one
// script per channel (and chunk) in one pipeline, streaming each move that
// advanced (streamMaxLen > 0; ≤ 0 uses the default). It returns, per move,
// the stream id of its entry, "" when it changed nothing.
func (s *Store) ApplyViewMoves(ctx context.Context, moves []ViewMove, streamMaxLen int64) ([]string, error) {
	if streamMaxLen <= 0 {
		streamMaxLen = ViewStreamMaxLenDefault
	}
	return s.applyView(ctx, moves, strconv.FormatInt(streamMaxLen, 10))
}

// RebuildView merges cursors read from Postgres into channel views without
// streaming them (watchers of a rebuilt view get a snapshot anyway), and
// marks the channels loaded for ttl.
func (s *Store) RebuildView(ctx context.Context, channels []string, moves []ViewMove, ttl time.Duration) error {
	if _, err := s.applyView(ctx, moves, "0"); err != nil {
		return err
	}
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, ch := range channels {
			pipe.Set(ctx, s.ViewLoadedKey(ch), "1", ttl)
		}
	})
	return err
}

func (s *Store) applyView(ctx context.Context, moves []ViewMove, maxLen string) ([]string, error) {
	out := make([]string, len(moves))
	byChannel := map[string][]int{}
	var order []string
	for i, m := range moves {
		if m.Kind != ViewRead && m.Kind != ViewDelivered {
			return nil, fmt.Errorf("channel view: unknown kind %q", m.Kind)
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
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		calls = calls[:0]
		for _, ch := range order {
			idx := byChannel[ch]
			for start := 0; start < len(idx); start += viewChunk {
				part := idx[start:min(start+viewChunk, len(idx))]
				argv := make([]any, 0, 1+5*len(part))
				argv = append(argv, maxLen)
				for _, i := range part {
					m := moves[i]
					argv = append(argv, m.User, string(m.Kind), strconv.FormatInt(m.Position.Epoch, 10),
						strconv.FormatInt(m.Position.Seq, 10), strconv.FormatInt(m.AtUnixMs, 10))
				}
				calls = append(calls, call{viewApplyScript.EvalSha(ctx, pipe, s.viewKeys(ch), argv...), part})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		ids, err := c.cmd.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("%w: applying channel view moves: %w", ErrUnavailable, err)
		}
		for j, i := range c.idx {
			if j < len(ids) && ids[j] != "-" {
				out[i] = ids[j]
			}
		}
	}
	return out, nil
}

// viewRemoveScript takes users' cursors of some kinds out of a channel's
// view and streams one removal entry (u user, k kind, rm "1", t at) per
// cursor it took out, so that live watchers stop showing it. KEYS = cur,
// r, d, stream; ARGV[1] = at (Unix ms), ARGV[2] = the kinds ("r", "d" or
// "rd"), then the users. The entry is appended without MAXLEN: removals
// are rare, and the next move's XADD trims the stream. Returns the number
// of entries appended.
var viewRemoveScript = redis.NewScript(`
local n = 0
for i = 3, #ARGV do
  local u = ARGV[i]
  for k in string.gmatch(ARGV[2], '[rd]') do
    local z = KEYS[2]
    if k == 'd' then z = KEYS[3] end
    redis.call('ZREM', z, u)
    if redis.call('HDEL', KEYS[1], k .. ':' .. u) == 1 then
      redis.call('XADD', KEYS[4], '*', 'u', u, 'k', k, 'rm', '1', 't', ARGV[1])
      n = n + 1
    end
  end
end
return n
`)

// RemoveFromView takes users' cursors of the given kinds out of a
// channel's view (a leave, or a user who stopped sharing a kind) and
// streams a removal entry for each cursor it took out (none for one that
// was not there), so that watchers stop showing it.
func (s *Store) RemoveFromView(ctx context.Context, ch string, users []string, kinds ...ViewKind) error {
	if len(users) == 0 || len(kinds) == 0 {
		return nil
	}
	var ks strings.Builder
	for _, k := range kinds {
		if k != ViewRead && k != ViewDelivered {
			return fmt.Errorf("channel view: unknown kind %q", k)
		}
		ks.WriteString(string(k))
	}
	argv := make([]any, 0, 2+len(users))
	argv = append(argv, strconv.FormatInt(time.Now().UnixMilli(), 10), ks.String())
	for _, u := range users {
		argv = append(argv, u)
	}
	keys := []string{s.ViewCurKey(ch), s.ViewZSetKey(ch, ViewRead), s.ViewZSetKey(ch, ViewDelivered), s.ViewStreamKey(ch)}
	var cmd *redis.Cmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		cmd = viewRemoveScript.EvalSha(ctx, pipe, keys, argv...)
	}); err != nil {
		return err
	}
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("%w: removing from the view of %s: %w", ErrUnavailable, ch, err)
	}
	return nil
}

// ViewCursor is one member's public cursor in a channel view.
type ViewCursor struct {
	Position receipt.Position
	AtUnixMs int64
}

// ChannelViewState is a channel's view read in one atomic script.
type ChannelViewState struct {
	Channel string
	// Read and Delivered are the members' public cursors by user.
	Read, Delivered map[string]ViewCursor
	// LastID is the stream's last entry id ("" when the stream is empty):
	// a watcher that starts from it after this snapshot misses nothing.
	LastID string
	// Loaded is true while the view is marked rebuilt from Postgres.
	Loaded bool
	// CursorsLeftOut: the view held more cursors than the read asked for
	// (ReadViewsUpTo), so Read and Delivered are empty.
	CursorsLeftOut bool
}

// viewReadScript reads a channel's view atomically. KEYS = cur, stream,
// loaded; ARGV[1] = the most cursor fields to read (negative: all).
// Returns {flat cur hash (empty when it holds more fields than ARGV[1]),
// last stream id or "", loaded 0|1, 1 when the cursors were left out}.
var viewReadScript = redis.NewScript(`
local cur, large = {}, 0
local most = tonumber(ARGV[1])
if most >= 0 and redis.call('HLEN', KEYS[1]) > most then large = 1 else cur = redis.call('HGETALL', KEYS[1]) end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = ""
if #last > 0 then id = last[1][1] end
return {cur, id, redis.call('EXISTS', KEYS[3]), large}
`)

// ReadViews reads channels' views, each atomically (cursors and the
// stream's last id at one instant), in one pipeline.
func (s *Store) ReadViews(ctx context.Context, channels []string) ([]ChannelViewState, error) {
	return s.ReadViewsUpTo(ctx, channels, -1)
}

// ReadViewsUpTo is ReadViews reading the cursors of a channel only when
// its view holds at most maxMembers members' worth (two kinds each; 0:
// never): a large channel's view answers its stream id and loaded mark
// with CursorsLeftOut, without its members' state crossing the wire.
func (s *Store) ReadViewsUpTo(ctx context.Context, channels []string, maxMembers int) ([]ChannelViewState, error) {
	most := "-1"
	if maxMembers >= 0 {
		most = strconv.Itoa(2 * maxMembers)
	}
	cmds := make([]*redis.Cmd, len(channels))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cmds[i] = viewReadScript.EvalSha(ctx, pipe, []string{s.ViewCurKey(ch), s.ViewStreamKey(ch), s.ViewLoadedKey(ch)}, most)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]ChannelViewState, len(channels))
	for i, ch := range channels {
		res, err := cmds[i].Slice()
		if err != nil || len(res) != 4 {
			return nil, fmt.Errorf("%w: reading the view of %s: %w", ErrUnavailable, ch, err)
		}
		v := ChannelViewState{Channel: ch, Read: map[string]ViewCursor{}, Delivered: map[string]ViewCursor{}}
		flat, _ := res[0].([]any)
		for j := 0; j+1 < len(flat); j += 2 {
			f, _ := flat[j].(string)
			val, _ := flat[j+1].(string)
			kind, user, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			c, err := ParseViewCursor(val)
			if err != nil {
				return nil, fmt.Errorf("channel view %s field %s: %w", ch, f, err)
			}
			switch ViewKind(kind) {
			case ViewRead:
				v.Read[user] = c
			case ViewDelivered:
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

// ParseViewCursor parses a cursor hash value "epoch:seq:at_unix_ms".
func ParseViewCursor(v string) (ViewCursor, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return ViewCursor{}, fmt.Errorf("cursor %q: want epoch:seq:at_unix_ms", v)
	}
	var n [3]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return ViewCursor{}, fmt.Errorf("cursor %q: %w", v, err)
		}
		n[i] = x
	}
	return ViewCursor{Position: receipt.Position{Epoch: n[0], Seq: n[1]}, AtUnixMs: n[2]}, nil
}

// ViewCounts are a channel's aggregate counts from its view's sorted sets.
type ViewCounts struct {
	// Read and Delivered count the view's members at or past the seq.
	Read, Delivered int64
	// ReadMembers and DeliveredMembers are the sets' sizes; LeastRead
	// and LeastDelivered their least seqs (0 when empty).
	ReadMembers, DeliveredMembers int64
	LeastRead, LeastDelivered     int64
}

// viewCountScript counts a large channel's view. KEYS = r, d; ARGV = seq,
// excluded user ("" none). Returns {read ≥ seq, delivered ≥ seq, |r|, |d|,
// least r, least d}, the excluded user left out of the counts.
var viewCountScript = redis.NewScript(`
local out = {}
for i = 1, 2 do
  local n = redis.call('ZCOUNT', KEYS[i], ARGV[1], '+inf')
  if ARGV[2] ~= "" then
    local sc = redis.call('ZSCORE', KEYS[i], ARGV[2])
    if sc and tonumber(sc) >= tonumber(ARGV[1]) then n = n - 1 end
  end
  out[i] = n
end
for i = 1, 2 do out[2 + i] = redis.call('ZCARD', KEYS[i]) end
for i = 1, 2 do
  local least = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #least == 2 then out[4 + i] = math.floor(tonumber(least[2])) else out[4 + i] = 0 end
end
return out
`)

// CountView counts a channel's view at seq (ZCOUNT), leaving out one user
// (the sender) when excluded is not empty.
func (s *Store) CountView(ctx context.Context, ch string, seq int64, excluded string) (ViewCounts, error) {
	var cmd *redis.Cmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		cmd = viewCountScript.EvalSha(ctx, pipe, []string{s.ViewZSetKey(ch, ViewRead), s.ViewZSetKey(ch, ViewDelivered)},
			strconv.FormatInt(seq, 10), excluded)
	}); err != nil {
		return ViewCounts{}, err
	}
	n, err := cmd.Int64Slice()
	if err == nil && len(n) != 6 {
		err = errors.New("short answer")
	}
	if err != nil {
		return ViewCounts{}, fmt.Errorf("%w: counting the view of %s: %w", ErrUnavailable, ch, err)
	}
	return ViewCounts{Read: n[0], Delivered: n[1], ReadMembers: n[2], DeliveredMembers: n[3], LeastRead: n[4], LeastDelivered: n[5]}, nil
}

// ApplySettingsToViews makes the channel views of st's user follow st: the
// kinds not shared leave the views of every channel the user has cursors
// in, the kinds shared are (re)applied from the user's public cursors in
// Redis (a max-merge, streamed when it moves a watcher's view; ≤ 0 uses
// the default stream bound). The gateway runs it after a settings change,
// the repairs after a settings repair that changed Redis.
func (s *Store) ApplySettingsToViews(ctx context.Context, st privacy.Settings, streamMaxLen int64) error {
	states, _, err := s.Get(ctx, st.User, nil)
	if err != nil {
		return err
	}
	var hide []ViewKind
	if !st.ShareRead {
		hide = append(hide, ViewRead)
	}
	if !st.ShareDelivered {
		hide = append(hide, ViewDelivered)
	}
	var moves []ViewMove
	for _, c := range states {
		if len(hide) > 0 {
			if err := s.RemoveFromView(ctx, c.Key.Channel, []string{st.User}, hide...); err != nil {
				return err
			}
		}
		if st.ShareRead && !c.Read.Position.IsZero() {
			moves = append(moves, ViewMove{Channel: c.Key.Channel, User: st.User, Kind: ViewRead, Position: c.Read.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
		if st.ShareDelivered && !c.Delivered.Position.IsZero() {
			moves = append(moves, ViewMove{Channel: c.Key.Channel, User: st.User, Kind: ViewDelivered, Position: c.Delivered.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
	}
	_, err = s.ApplyViewMoves(ctx, moves, streamMaxLen)
	return err
}
