package watch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// The read-by view's keys the hub reads (pkg/views/readby owns them and
// names them: Config.Keys; a channel's keys share one Redis Cluster
// slot):
//
//	cursors     hash: "r:<user>" / "d:<user>" → "epoch:seq:at_unix_ms",
//	            each member's public read / delivered cursor
//	stream      one entry per public cursor advance: u user,
//	            k "r"|"d", e epoch, s seq, t at_unix_ms; or per removal
//	            from the view (a leave, a kind no longer shared, an
//	            erasure): u, k, rm "1", t; or per thread move (never in
//	            the cursors hash): k "tr"|"td" a member's public thread
//	            read / delivered cursor (u, root, e, s, t), k "th" a
//	            thread's head (root, s, t)

// Keys names the view's keys of a channel: readby.Store.
type Keys interface {
	// StreamKey is a channel's move stream.
	StreamKey(ch string) string
	// CurKey is a channel's cursor hash.
	CurKey(ch string) string
}

// entry is one stream entry: a public cursor that advanced, or (removed)
// one that left the view. A thread's entry has its root: a member's
// thread cursor, or (head, no user or kind) the thread's head.
type entry struct {
	id      streamID
	user    string
	kind    receiptsv1.Kind
	pos     position
	atUnix  int64
	removed bool
	root    int64
	head    bool
}

type position struct{ epoch, seq int64 }

func (p position) compare(o position) int {
	switch {
	case p.epoch != o.epoch:
		if p.epoch < o.epoch {
			return -1
		}
		return 1
	case p.seq < o.seq:
		return -1
	case p.seq > o.seq:
		return 1
	}
	return 0
}

func parseKind(k string) (receiptsv1.Kind, bool) {
	switch k {
	case "r":
		return receiptsv1.Kind_READ, true
	case "d":
		return receiptsv1.Kind_DELIVERED, true
	}
	return 0, false
}

// parseEntry reads a stream entry; ok is false for one this version does
// not understand (skipped, so a newer writer never stalls an older reader).
func parseEntry(m redis.XMessage) (entry, bool) {
	id, err := parseStreamID(m.ID)
	if err != nil {
		return entry{}, false
	}
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	if k := str("k"); strings.HasPrefix(k, "t") {
		return parseThreadEntry(id, k, str)
	}
	kind, ok := parseKind(str("k"))
	user := str("u")
	if str("rm") == "1" {
		t, _ := strconv.ParseInt(str("t"), 10, 64)
		return entry{id: id, user: user, kind: kind, atUnix: t, removed: true}, ok && user != ""
	}
	e, err1 := strconv.ParseInt(str("e"), 10, 64)
	s, err2 := strconv.ParseInt(str("s"), 10, 64)
	t, _ := strconv.ParseInt(str("t"), 10, 64)
	if !ok || user == "" || err1 != nil || err2 != nil {
		return entry{}, false
	}
	return entry{id: id, user: user, kind: kind, pos: position{e, s}, atUnix: t}, true
}

// parseThreadEntry reads a thread move: kind "th" (a head) or "tr"/"td"
// (a member's thread cursor).
func parseThreadEntry(id streamID, k string, str func(string) string) (entry, bool) {
	root, err1 := strconv.ParseInt(str("root"), 10, 64)
	e, err2 := strconv.ParseInt(str("e"), 10, 64)
	s, err3 := strconv.ParseInt(str("s"), 10, 64)
	t, _ := strconv.ParseInt(str("t"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || root <= 0 {
		return entry{}, false
	}
	out := entry{id: id, root: root, pos: position{e, s}, atUnix: t}
	if k == "th" {
		out.head = true
		return out, true
	}
	kind, ok := parseKind(strings.TrimPrefix(k, "t"))
	out.user, out.kind = str("u"), kind
	return out, ok && out.user != ""
}

// probeScript answers, atomically for one channel: its stream's last
// generated id, and the id below which entries may be gone: the first
// entry's id when some entry was ever trimmed or deleted (entries-added
// above the length), else "0-0" (all "0-0" when there is no stream); and,
// when ARGV[1] is not "0", the cursors hash if it holds at most ARGV[1]
// fields (else nothing, and a 1 for "large": a large channel's snapshot
// never reads its members' state): a snapshot whose cursors are exactly
// the stream's entries up to the last id (the gateway's script writes
// both together). (XINFO's max-deleted-entry-id is not enough: in
// Redis 7.0 a MAXLEN trim does not move it.)
var probeScript = redis.NewScript(`
local last, gone = '0-0', '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local f = {}
  for i = 1, #info, 2 do f[info[i]] = info[i + 1] end
  last = f['last-generated-id']
  if f['entries-added'] > f['length'] then
    if f['length'] == 0 then gone = last else gone = f['recorded-first-entry-id'] end
  end
end
local cur, large = {}, 0
local most = tonumber(ARGV[1])
if most > 0 then
  if redis.call('HLEN', KEYS[2]) > most then large = 1 else cur = redis.call('HGETALL', KEYS[2]) end
end
return {last, gone, cur, large}
`)

// probe is one channel's answer of probeScript.
type probe struct {
	// last is the stream's last id; entries before firstKept may have
	// been trimmed (zero when none ever was).
	last, firstKept streamID
	ticks           *receiptsv1.ChannelTicks // nil unless asked
}

// expired reports whether a stream resumed after id may miss entries:
// some entry after id was trimmed (the first kept one is past id: id
// itself, or something after it, is gone), or id is past the stream's
// last (the stream was lost and started again).
func (p probe) expired(id streamID) bool {
	return (p.firstKept != streamID{} && p.firstKept.compare(id) > 0) || id.compare(p.last) > 0
}

// probeChannels runs probeScript for every channel in one pipeline (split
// by node in a cluster); withCursors says which channels need a snapshot,
// whose members' cursors are read for a channel of at most maxMembers.
func probeChannels(ctx context.Context, rdb redis.UniversalClient, keys Keys, channels []string, maxMembers int, withCursors func(string) bool) (map[string]probe, error) {
	if len(channels) == 0 {
		return map[string]probe{}, nil
	}
	// Two fields per member: its read and its delivered cursor.
	most := strconv.Itoa(2 * maxMembers)
	cmds := make([]*redis.Cmd, len(channels))
	for attempt := 0; ; attempt++ {
		// Load the script so the pipeline can call it by SHA; load it again
		// once if Redis lost its script cache meanwhile (a restart, a
		// SCRIPT FLUSH).
		if err := probeScript.Load(ctx, rdb).Err(); err != nil {
			return nil, fmt.Errorf("loading the probe script: %w", err)
		}
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, ch := range channels {
				flag := "0"
				if withCursors(ch) {
					flag = most
				}
				cmds[i] = probeScript.EvalSha(ctx, p, []string{keys.StreamKey(ch), keys.CurKey(ch)}, flag)
			}
			return nil
		})
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("probing channel streams: %w", err)
		}
		break
	}
	out := make(map[string]probe, len(channels))
	for i, ch := range channels {
		v, ok := cmds[i].Val().([]any)
		if !ok || len(v) != 4 {
			return nil, fmt.Errorf("probing %q: unexpected answer %v", ch, cmds[i].Val())
		}
		last, err1 := parseStreamID(fmt.Sprint(v[0]))
		gone, err2 := parseStreamID(fmt.Sprint(v[1]))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("probing %q: bad ids %v %v", ch, v[0], v[1])
		}
		pr := probe{last: last, firstKept: gone}
		if withCursors(ch) {
			flat, _ := v[2].([]any)
			pr.ticks = ticksOf(ch, flat)
			if large, _ := v[3].(int64); large == 1 {
				pr.ticks.Detailed = false
			}
		}
		out[ch] = pr
	}
	return out, nil
}

// ticksOf builds a channel's snapshot from its cursors hash (HGETALL's
// flat field, value list): each member's public read and delivered cursor.
// The head, the watermarks and the member count are the ticks read's
// (GetTicks), added by Hub.snapshot when the hub has a TicksFunc.
func ticksOf(ch string, flat []any) *receiptsv1.ChannelTicks {
	members := map[string]*receiptsv1.MemberCursors{}
	for i := 0; i+1 < len(flat); i += 2 {
		f, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		k, user, ok := strings.Cut(f, ":")
		kind, kok := parseKind(k)
		parts := strings.Split(v, ":")
		if !ok || !kok || user == "" || len(parts) < 2 {
			continue
		}
		e, err1 := strconv.ParseInt(parts[0], 10, 64)
		s, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		m := members[user]
		if m == nil {
			m = &receiptsv1.MemberCursors{UserId: user}
			members[user] = m
		}
		p := &receiptsv1.Position{Epoch: e, Seq: s}
		if kind == receiptsv1.Kind_READ {
			m.Read = p
		} else {
			m.Delivered = p
		}
	}
	t := &receiptsv1.ChannelTicks{ChannelId: ch, Detailed: true, Members: make([]*receiptsv1.MemberCursors, 0, len(members))}
	for _, m := range members {
		t.Members = append(t.Members, m)
	}
	slices.SortFunc(t.Members, func(a, b *receiptsv1.MemberCursors) int { return strings.Compare(a.UserId, b.UserId) })
	return t
}
