package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The channel state beside the user hashes. Every key carries a
// hash tag, {user} or {channel}, so Redis Cluster keeps what one script
// touches in one slot:
//
//	hd:{channel}         string: the head, "SEQ MSG UPDATED_MS" (numbers
//	                     base 62; "0  0" = known to have none): a string,
//	                     so a user's heads read with one MGET (heads.go)
//	um:{user}            hash: channel → the membership register
//	                     "M VERSION_SEQ VERSION_MS JOIN_SEQ" (M 1 or 0,
//	                     numbers base 62); ":loaded" once hydrated; ":l"
//	                     → how many registers say "left", kept by the
//	                     scripts in a hash made with it (an older build's
//	                     hash has none), so a user who left nothing is
//	                     read without values
//	cm:{channel}         hash: user → the same register; ":n" → the
//	                     joined-member count, kept by the script on every
//	                     member/non-member transition (in the same key as
//	                     the registers it counts, so it can never be lost
//	                     or evicted apart from them); ":loaded" once
//	                     hydrated
//
// A user's mentions are a kind's of their own (pkg/kinds/mentions).
// The membership register lives twice, per user and per channel: two
// slots in a cluster, so two scripts, both max-merges; a failure of one is
// repaired by the drift sweep. Field names starting with ':' are markers
// no id can equal (an id may hold ':', never first: receipt.ValidateID).

const (
	countField = ":n"
	// leftCountField counts a membership hash's left registers.
	leftCountField = ":l"
	// seqWidth is the width of a padded base-62 seq (padSeq).
	seqWidth = 11
	// memberChunk bounds the registers of one hydrate script call.
	memberChunk = 256
	// MaxUnreadChannels bounds a user's default channel set in one
	// read of it (the unread view's, a kind's user hash read whole): the
	// Postgres fallback's bound (pgstore.MaxChannelsPerRead), so that
	// both stores answer the same users.
	MaxUnreadChannels = 10000
)

// ErrTooManyChannels is the answer of a read of a user's default channel
// set (or of a user hash read whole) larger than MaxUnreadChannels: read
// it from Postgres (which pages the first MaxUnreadChannels in channel
// order) or list the channels.
var ErrTooManyChannels = errors.New("more channels than one unread read covers")

// UserMembersKey is a user's membership hash.
func (s *Store) UserMembersKey(user string) string { return s.prefix + "um:{" + user + "}" }

// ChannelMembersKey is a channel's membership hash.
func (s *Store) ChannelMembersKey(ch string) string { return s.prefix + "cm:{" + ch + "}" }

const luaRegister = `
local function reg(v)
  local t = {}
  for p in string.gmatch(v, "[^ ]+") do t[#t+1] = p end
  return t
end
-- channel.Membership.Compare: version seq, version ms, join after leave,
-- join point.
local function cmpreg(a, b)
  local c = cmp(a[2], b[2]) if c ~= 0 then return c end
  c = cmp(a[3], b[3]) if c ~= 0 then return c end
  if a[1] ~= b[1] then if a[1] == "1" then return 1 else return -1 end end
  return cmp(a[4], b[4])
end
local function mergereg(key, field, inc)
  local cur = redis.call('HGET', key, field)
  if cur and cmpreg(reg(inc), reg(cur)) <= 0 then return {0, cur, cur} end
  redis.call('HSET', key, field, inc)
  return {1, inc, cur or ""}
end
-- countflag moves the count in field counter of key for a register
-- changed from was to now ("" or false: none), by whether each starts with
-- flag.
local function countflag(key, counter, was, now, flag)
  local a, b = was and string.sub(was, 1, 1) == flag, string.sub(now, 1, 1) == flag
  if a ~= b then
    local d = -1
    if b then d = 1 end
    redis.call('HINCRBY', key, counter, d)
  end
end
-- A user's membership hash counts its left registers in ':l' when it
-- has had the count since it was made (an older build's hash has none:
-- readers then decode every register). leftcount starts the count of a
-- hash about to be made and tells whether the hash keeps one.
local function leftcount(key)
  if redis.call('HEXISTS', key, ':l') == 1 then return true end
  if redis.call('EXISTS', key) == 1 then return false end
  redis.call('HSET', key, ':l', '0')
  return true
end
local function mergeum(key, field, inc)
  local counted = leftcount(key)
  local r = mergereg(key, field, inc)
  if counted and r[1] == 1 then countflag(key, ':l', r[3], r[2], "0") end
  return r
end
local function mergecm(key, field, inc)
  local r = mergereg(key, field, inc)
  if r[1] == 1 then countflag(key, ':n', r[3], r[2], "1") end
  return r
end
`

// headScript raises a channel's head and keeps the message's id among
// the channel's newest. KEYS[1] = the channel value (heads.go), KEYS[2] =
// the message-id set; ARGV = seq, message id, time (numbers base 62),
// then the seq in decimal and how many ids to keep. Returns {changed, the
// channel value}.
var headScript = redis.NewScript(luaCommon + luaChannelValue + `
if ARGV[2] ~= "" and ARGV[4] ~= "0" then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[4] .. " " .. ARGV[2])
  local keep = tonumber(ARGV[5])
  if redis.call('ZCARD', KEYS[2]) > keep + keep / 10 then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -keep - 1)
  end
end
local f = cvget(KEYS[1])
local ts = ARGV[3]
if f[1] ~= "-" then
  if cmp(ARGV[1], f[1]) <= 0 then return {0, table.concat(f, " ", 1, 5)} end
  if cmp(f[3], ts) > 0 then ts = f[3] end
end
f[1], f[2], f[3] = ARGV[1], ARGV[2], ts
return {1, cvset(KEYS[1], f)}
`)

// userMemberScript merges registers into a user's membership hash.
// KEYS[1] = um hash, KEYS[2] (optional) = the user's tombstone; ARGV =
// mark ("1": set ":loaded" after), then channel, register pairs. Returns,
// per pair, {changed, register}, then with KEYS[2] the user's erasure
// generation (decimal, "-1": GenerationUnknown), read in the script that
// writes, so the event stamped with it is ordered against an erasure as
// its Redis write is (as mergeScript).
var userMemberScript = redis.NewScript(luaCommon + luaRegister + `
local out = {}
for i = 2, #ARGV, 2 do
  local r = mergeum(KEYS[1], ARGV[i], ARGV[i+1])
  out[#out+1] = r[1] out[#out+1] = r[2]
end
if ARGV[1] == "1" then
  leftcount(KEYS[1])
  redis.call('HSET', KEYS[1], ':loaded', '1')
end
if KEYS[2] then out[#out+1] = redis.call('HGET', KEYS[2], 'g') or "-1" end
return out
`)

// changeMemberScript writes a join or leave into a user's membership
// hash with a version Redis orders: the proposed version seq (the head)
// and, as version time, Redis' clock (TIME, in ms) — or, when that does
// not order after the register stored, the stored version seq and one
// more than its time. So a change always wins over what it read, and no
// gateway's clock decides a join/leave race. KEYS[1] = um hash, KEYS[2] =
// the user's tombstone; ARGV = channel, the proposed register (its version
// time is replaced). Returns {1, register, the user's erasure generation
// (as userMemberScript)}.
var changeMemberScript = redis.NewScript(luaCommon + luaRegister + `
local inc = reg(ARGV[2])
local t = redis.call('TIME')
inc[3] = b62(string.format("%d", tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local c = reg(cur)
  if cmp(inc[2], c[2]) < 0 or (inc[2] == c[2] and cmp(inc[3], c[3]) <= 0) then
    local n = 0
    for i = 1, #c[3] do n = n * 62 + string.find(D, string.sub(c[3], i, i), 1, true) - 1 end
    inc[2], inc[3] = c[2], b62(string.format("%d", n + 1))
  end
end
local v = table.concat(inc, " ")
local counted = leftcount(KEYS[1])
redis.call('HSET', KEYS[1], ARGV[1], v)
if counted then countflag(KEYS[1], ':l', cur, v, "0") end
return {1, v, redis.call('HGET', KEYS[2], 'g') or "-1"}
`)

// channelMemberScript merges registers into a channel's membership hash,
// keeping the member count. KEYS[1] = cm hash; ARGV as userMemberScript,
// user ids for channels. Returns, per pair, {changed, register}, then
// the member count.
var channelMemberScript = redis.NewScript(luaCommon + luaRegister + `
local out = {}
for i = 2, #ARGV, 2 do
  local r = mergecm(KEYS[1], ARGV[i], ARGV[i+1])
  out[#out+1] = r[1] out[#out+1] = r[2]
end
if ARGV[1] == "1" then redis.call('HSET', KEYS[1], ':loaded', '1') end
out[#out+1] = tonumber(redis.call('HGET', KEYS[1], ':n') or "0")
return out
`)

var channelScripts = []*redis.Script{headScript, userMemberScript, changeMemberScript, channelMemberScript}

func padSeq(seq int64) string {
	var buf [seqWidth]byte
	return string(appendPadded(buf[:0], seq))
}

// appendPadded appends padSeq(seq) to b without allocating for it.
func appendPadded(b []byte, seq int64) []byte {
	var digits [seqWidth]byte
	d := appendB62(digits[:0], seq)
	for range seqWidth - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

func parsePadded(s string) (int64, error) {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		t = "0"
	}
	return parseB62(t)
}

func encodeHead(h channel.Head) (string, error) {
	if h.Seq < 0 || h.UpdatedAtUnixMs < 0 || strings.IndexByte(h.MessageID, ' ') >= 0 {
		return "", fmt.Errorf("storing the head of %s in redis: not storable: %+v", h.Channel, h)
	}
	return string(appendB62(nil, h.Seq)) + " " + h.MessageID + " " + string(appendB62(nil, h.UpdatedAtUnixMs)), nil
}

func decodeHead(ch, v string) (channel.Head, error) {
	seq, msg, at, ok := parseHead(v)
	if !ok {
		return channel.Head{}, fmt.Errorf("decoding the redis head of %s: unexpected %q", ch, v)
	}
	return channel.Head{Channel: ch, Seq: seq, MessageID: msg, UpdatedAtUnixMs: at}, nil
}

// parseHead reads a head's value (a channel's or a thread's).
func parseHead(v string) (seq int64, msg string, at int64, ok bool) {
	var f [3]string
	if splitSpaces(v, f[:]) != len(f) {
		return 0, "", 0, false
	}
	seq, err1 := parseB62(f[0])
	at, err2 := parseB62(f[2])
	if err1 != nil || err2 != nil {
		return 0, "", 0, false
	}
	return seq, f[1], at, true
}

func encodeRegister(m channel.Membership) (string, error) {
	if m.VersionSeq < 0 || m.VersionUnixMs < 0 || m.JoinSeq < 0 {
		return "", fmt.Errorf("storing the membership of %s in redis: negative number in %+v", m.Key.KafkaKey(), m)
	}
	b := []byte{'0', ' '}
	if m.Member {
		b[0] = '1'
	}
	b = appendB62(b, m.VersionSeq)
	b = append(b, ' ')
	b = appendB62(b, m.VersionUnixMs)
	b = append(b, ' ')
	return string(appendB62(b, m.JoinSeq)), nil
}

func decodeRegister(k receipt.Key, v string) (channel.Membership, error) {
	var f [4]string
	bad := func() (channel.Membership, error) {
		return channel.Membership{}, fmt.Errorf("decoding the redis membership of %s: unexpected %q", k.KafkaKey(), v)
	}
	if splitSpaces(v, f[:]) != len(f) || (f[0] != "0" && f[0] != "1") {
		return bad()
	}
	m := channel.Membership{Key: k, Member: f[0] == "1"}
	var err error
	for i, p := range []*int64{&m.VersionSeq, &m.VersionUnixMs, &m.JoinSeq} {
		if *p, err = parseB62(f[i+1]); err != nil {
			return bad()
		}
	}
	return m, nil
}

// ReadEach calls decode with each answer of cmds that Redis holds. An
// answer decode refuses is skipped and counted (SkipUndecodable): an
// undecodable stored field never fails a whole read (the sweep repairs it
// from Postgres).
func (s *Store) ReadEach(cmds []*redis.StringCmd, decode func(i int, v string) error) error {
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if decode(i, v) != nil {
			s.SkipUndecodable()
		}
	}
	return nil
}

// HeadResult is the outcome of one head raise.
type HeadResult struct {
	// Head is the channel's head after the raise.
	Head channel.Head
	// Advanced is true when the raise moved the head.
	Advanced bool
	Err      error
}

// RaiseHeads max-merges heads into their channels' head keys in one
// pipeline and returns the head after each.
func (s *Store) RaiseHeads(ctx context.Context, heads []channel.Head) ([]HeadResult, error) {
	out := make([]HeadResult, len(heads))
	cmds := make([]*redis.Cmd, len(heads))
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, h := range heads {
			v, err := encodeHead(h)
			if err != nil {
				out[i].Err = err
				continue
			}
			f := strings.SplitN(v, " ", 3)
			cmds[i] = headScript.EvalSha(ctx, pipe, []string{s.HeadKey(h.Channel), s.MessageIDsKey(h.Channel)}, f[0], f[1], f[2], h.Seq, MessageIDsKept)
		}
	})
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: raising the head of %s: %w", ErrUnavailable, heads[i].Channel, cerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _, _, _ := splitChannelValue(res[1])
		out[i].Head, out[i].Err = decodeHead(heads[i].Channel, v)
		out[i].Advanced = changed == 1
	}
	return out, err
}

// Heads returns the heads Redis knows of the listed channels: a channel
// known to have no head maps to a Head with Seq 0; a channel Redis knows
// nothing about is absent (read Postgres, then HydrateHeads).
func (s *Store) Heads(ctx context.Context, channels []string) (map[string]channel.Head, error) {
	var heads *ChannelValues
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		heads = s.QueueChannelValues(ctx, pipe, channels)
	}); err != nil {
		return nil, err
	}
	out := make(map[string]channel.Head, len(channels))
	for i, ch := range channels {
		v, ok, err := heads.Head(i)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !ok {
			continue
		}
		if h, err := decodeHead(ch, v); err != nil {
			s.SkipUndecodable()
		} else {
			out[ch] = h
		}
	}
	return out, nil
}

// HydrateHeads max-merges durable heads, and records the channels of none
// (known to have no head yet) so that later reads need not ask Postgres
// again; a real head always beats that record.
func (s *Store) HydrateHeads(ctx context.Context, heads []channel.Head, none []string) error {
	all := append([]channel.Head(nil), heads...)
	for _, ch := range none {
		all = append(all, channel.Head{Channel: ch})
	}
	res, err := s.RaiseHeads(ctx, all)
	if err != nil {
		return fmt.Errorf("hydrating heads: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("hydrating heads: %w", r.Err)
		}
	}
	return nil
}

// MembershipResult is the outcome of one register merge.
type MembershipResult struct {
	// Membership is the user's register after the merge (the user's hash).
	Membership channel.Membership
	// Changed is true when the merge replaced the register.
	Changed bool
	// MemberCount is the channel's joined-member count after the merge,
	// as its hash holds it (exact once the hash is hydrated).
	MemberCount int64
	// Generation is the user's erasure generation read in the script that
	// merged the user's register: the gateway stamps it on the event.
	Generation int64
	Err        error
}

// MergeMemberships merges registers into both membership hashes (the
// user's and the channel's, which keeps the member count) in one pipeline.
func (s *Store) MergeMemberships(ctx context.Context, regs []channel.Membership) ([]MembershipResult, error) {
	out := make([]MembershipResult, len(regs))
	um := make([]*redis.Cmd, len(regs))
	cm := make([]*redis.Cmd, len(regs))
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, m := range regs {
			v, err := encodeRegister(m)
			if err != nil {
				out[i].Err = err
				continue
			}
			um[i] = userMemberScript.EvalSha(ctx, pipe, []string{s.UserMembersKey(m.Key.User), s.TombstoneKey(m.Key.User)}, "0", m.Key.Channel, v)
			cm[i] = channelMemberScript.EvalSha(ctx, pipe, []string{s.ChannelMembersKey(m.Key.Channel)}, "0", m.Key.User, v)
		}
	})
	for i := range regs {
		if um[i] == nil {
			continue
		}
		res, uerr := um[i].Slice()
		cres, cerr := cm[i].Slice()
		if uerr != nil || cerr != nil {
			out[i].Err = fmt.Errorf("%w: merging the membership of %s: %w", ErrUnavailable, regs[i].Key.KafkaKey(), errors.Join(uerr, cerr))
			continue
		}
		changed, _ := res[0].(int64)
		v, _ := res[1].(string)
		out[i].Membership, out[i].Err = decodeRegister(regs[i].Key, v)
		out[i].Changed = changed == 1
		if len(res) >= 3 {
			g, _ := res[2].(string)
			if gen, gerr := parseGeneration(g); gerr != nil {
				out[i].Err = gerr
			} else {
				out[i].Generation = gen
			}
		}
		out[i].MemberCount, _ = cres[len(cres)-1].(int64)
	}
	return out, err
}

// ChangeMembership writes a join or leave: into the user's hash first,
// where Redis sets its version (changeMemberScript), then the register
// so versioned into the channel's hash (another slot in a cluster: a
// failure there is repaired by the drift sweep, as MergeMemberships').
// Membership is the register as versioned by Redis once the user's hash
// took it (even when the channel's failed), else m.
func (s *Store) ChangeMembership(ctx context.Context, m channel.Membership) MembershipResult {
	out := MembershipResult{Membership: m}
	v, err := encodeRegister(m)
	if err != nil {
		out.Err = err
		return out
	}
	res, err := changeMemberScript.Run(ctx, s.rdb, []string{s.UserMembersKey(m.Key.User), s.TombstoneKey(m.Key.User)}, m.Key.Channel, v).Slice()
	if err != nil || len(res) != 3 {
		out.Err = fmt.Errorf("%w: changing the membership of %s: %w", ErrUnavailable, m.Key.KafkaKey(), err)
		return out
	}
	v, _ = res[1].(string)
	versioned, err := decodeRegister(m.Key, v)
	if err != nil {
		out.Err = err
		return out
	}
	out.Membership = versioned
	g, _ := res[2].(string)
	if out.Generation, out.Err = parseGeneration(g); out.Err != nil {
		return out
	}
	out.Changed = true
	cres, err := channelMemberScript.Run(ctx, s.rdb, []string{s.ChannelMembersKey(m.Key.Channel)}, "0", m.Key.User, v).Slice()
	if err != nil {
		out.Err = fmt.Errorf("%w: changing the membership of %s in the channel's hash: %w", ErrUnavailable, m.Key.KafkaKey(), err)
		return out
	}
	out.MemberCount, _ = cres[len(cres)-1].(int64)
	return out
}

// Memberships returns a user's registers in the listed channels (all when
// empty) and whether the hash is complete (hydrated, mentions included).
func (s *Store) Memberships(ctx context.Context, user string, channels []string) ([]channel.Membership, bool, error) {
	return s.registers(ctx, s.UserMembersKey(user), channels, func(field string) receipt.Key {
		return receipt.Key{User: user, Channel: field}
	})
}

// ChannelMembers returns a channel's registers of the listed users (all
// when empty: bounded by the channel's size) and whether the hash is
// complete (MemberCount has the count).
func (s *Store) ChannelMembers(ctx context.Context, ch string, users []string) ([]channel.Membership, bool, error) {
	return s.registers(ctx, s.ChannelMembersKey(ch), users, func(field string) receipt.Key {
		return receipt.Key{User: field, Channel: ch}
	})
}

// RegistersOf returns, for each key, its register in the user's hash and
// in the channel's hash (nil where absent), in one pipelined round trip:
// the drift sweep's lookup of a page.
func (s *Store) RegistersOf(ctx context.Context, keys []receipt.Key) (byUser, byChannel []*channel.Membership, err error) {
	ucmds := make([]*redis.StringCmd, len(keys))
	ccmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			ucmds[i] = pipe.HGet(ctx, s.UserMembersKey(k.User), k.Channel)
			ccmds[i] = pipe.HGet(ctx, s.ChannelMembersKey(k.Channel), k.User)
		}
	}); err != nil {
		return nil, nil, err
	}
	read := func(cmds []*redis.StringCmd) ([]*channel.Membership, error) {
		out := make([]*channel.Membership, len(cmds))
		err := s.ReadEach(cmds, func(i int, v string) error {
			m, err := decodeRegister(keys[i], v)
			if err == nil {
				out[i] = &m
			}
			return err
		})
		return out, err
	}
	if byUser, err = read(ucmds); err != nil {
		return nil, nil, err
	}
	byChannel, err = read(ccmds)
	return byUser, byChannel, err
}

// MemberCount returns a channel's joined-member count and whether its
// membership hash is complete (otherwise the count covers only the
// registers merged since it was lost: hydrate first).
func (s *Store) MemberCount(ctx context.Context, ch string) (int64, bool, error) {
	vals, err := s.rdb.HMGet(ctx, s.ChannelMembersKey(ch), countField, loadedField).Result()
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var n int64
	if v, ok := vals[0].(string); ok {
		n, _ = strconv.ParseInt(v, 10, 64)
	}
	return n, vals[1] != nil, nil
}

func (s *Store) registers(ctx context.Context, key string, fields []string, keyOf func(string) receipt.Key) ([]channel.Membership, bool, error) {
	var out []channel.Membership
	if len(fields) == 0 {
		m, err := s.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		_, complete := m[loadedField]
		for f, v := range m {
			if strings.HasPrefix(f, ":") {
				continue
			}
			r, err := decodeRegister(keyOf(f), v)
			if err != nil {
				return nil, false, err
			}
			out = append(out, r)
		}
		return out, complete, nil
	}
	vals, err := s.rdb.HMGet(ctx, key, append([]string{loadedField}, fields...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		r, err := decodeRegister(keyOf(fields[i]), str)
		if err != nil {
			return nil, false, err
		}
		out = append(out, r)
	}
	return out, vals[0] != nil, nil
}

// HydrateMemberships merges a user's durable registers and then marks
// the user's membership hash complete, so that reads trust it. Every
// write is a merge: a newer value written meanwhile wins. A complete
// view needs the user's mentions hydrated too (pkg/kinds/mentions).
func (s *Store) HydrateMemberships(ctx context.Context, user string, regs []channel.Membership) error {
	for start := 0; start < len(regs); start += memberChunk {
		if err := s.mergeRegisters(ctx, userMemberScript, s.UserMembersKey(user), regs[start:min(start+memberChunk, len(regs))], false,
			func(m channel.Membership) string { return m.Key.Channel }); err != nil {
			return fmt.Errorf("hydrating the memberships of %s: %w", user, err)
		}
	}
	// The script, not an HSET: a hash it makes counts its left registers.
	if err := userMemberScript.Run(ctx, s.rdb, []string{s.UserMembersKey(user)}, "1").Err(); err != nil {
		return fmt.Errorf("%w: marking the memberships of %s complete: %w", ErrUnavailable, user, err)
	}
	return nil
}

// HydrateChannelMembers merges a page of a channel's durable registers
// (the member count follows), and with last marks the hash complete: call
// it for every page of the channel, the last one with last.
func (s *Store) HydrateChannelMembers(ctx context.Context, ch string, regs []channel.Membership, last bool) error {
	for start := 0; ; start += memberChunk {
		end := min(start+memberChunk, len(regs))
		if err := s.mergeRegisters(ctx, channelMemberScript, s.ChannelMembersKey(ch), regs[start:end], last && end == len(regs),
			func(m channel.Membership) string { return m.Key.User }); err != nil {
			return fmt.Errorf("hydrating the members of %s: %w", ch, err)
		}
		if end == len(regs) {
			return nil
		}
	}
}

func (s *Store) mergeRegisters(ctx context.Context, sc *redis.Script, key string, regs []channel.Membership, mark bool, field func(channel.Membership) string) error {
	flag := "0"
	if mark {
		flag = "1"
	}
	argv := []any{flag}
	for _, m := range regs {
		v, err := encodeRegister(m)
		if err != nil {
			return err
		}
		argv = append(argv, field(m), v)
	}
	if len(argv) == 1 && !mark {
		return nil
	}
	if err := sc.Run(ctx, s.rdb, []string{key}, argv...).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}
