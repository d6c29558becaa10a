package redisstore

// What a kind of state that owns its Redis layout (a folder below
// pkg/kinds) is written against: the store's pipelines and scripts, its
// markers and bounds, and its accounting of undecodable fields. The kind
// names its own keys (under Prefix, with a {user} or {channel} hash tag).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

const (
	// LoadedField marks a hash hydrated from Postgres: a read that finds
	// it trusts the hash whole. It starts with ':', as every marker field
	// does, so no channel id can collide with it (receipt.ValidateID).
	LoadedField = loadedField
	// HydrateChunk bounds the fields one hydrate script call writes.
	HydrateChunk = hydrateChunk
	// DefaultsTTL is how long a hash that only caches "nothing set" (its
	// marker alone, or the defaults read from Postgres) stays in Redis.
	DefaultsTTL = time.Hour
	// WholeHashCount is HRANDFIELD's count for reading a whole user hash:
	// more than a hash within MaxUnreadChannels holds (its channels and
	// at most two markers), so a full answer means too many channels.
	WholeHashCount = MaxUnreadChannels + 3
	// LuaCmp is a Lua function cmp(a, b) ordering decimal numerals
	// without leading zeros (-1, 0, 1), for a kind's script to start
	// with.
	LuaCmp = luaViewCmp
	// LuaMergeFields is the Lua function mergefields(key, order) of a
	// kind whose user hash holds one register a field: it merges the
	// script's ARGV (mark "1": set LoadedField after; the TTL in ms of a
	// hash holding the marker alone, DefaultsTTL; then field, register
	// pairs) into the hash at key, keeping a field's register unless
	// order(new, stored) > 0, and returns, per pair, {changed,
	// register}. A hash of a user who set nothing only caches "none"
	// and expires; a register in it never does.
	LuaMergeFields = luaMergeFields
	// SeqWidth is the width of a padded seq (PadSeq).
	SeqWidth = seqWidth
)

// PadSeq is seq in base 62, left-padded with '0' to SeqWidth, so that
// padded seqs sort (as bytes) as the seqs do: the channel value's parts
// and the members of a kind's sorted sets.
func PadSeq(seq int64) string { return padSeq(seq) }

// SplitSpaces puts the space-separated fields of v into f (those beyond
// len(f) are dropped) and returns how many v has, without allocating: a
// kind's decoder of its values.
func SplitSpaces(v string, f []string) int { return splitSpaces(v, f) }

// AppendPadded appends PadSeq(seq) to b without allocating for it.
func AppendPadded(b []byte, seq int64) []byte { return appendPadded(b, seq) }

// DecodeHead decodes a channel's head as ChannelValues.Head answers it.
func DecodeHead(ch, v string) (channel.Head, error) { return decodeHead(ch, v) }

// ParsePadded inverts PadSeq.
func ParsePadded(s string) (int64, error) { return parsePadded(s) }

// Exec runs a pipeline that build fills (nothing when it queues
// nothing). When Redis lost its script cache (a restart, SCRIPT FLUSH) it
// loads the store's scripts and scripts (those build runs by SHA that
// the store does not own: a kind's) and runs the pipeline once more. A
// failure wraps ErrUnavailable.
func (s *Store) Exec(ctx context.Context, build func(redis.Pipeliner), scripts ...*redis.Script) ([]redis.Cmder, error) {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		build(pipe)
		if pipe.Len() == 0 {
			return nil, nil
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
			if lerr := s.Load(ctx, scripts...); lerr != nil {
				return nil, lerr
			}
			continue
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return cmds, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return cmds, nil
	}
}

// EvalShaOnce queues script by SHA as a command go-redis never sends
// twice. go-redis sends a command again when its connection broke (EOF,
// reset) or its node died, on the same node and then on the slot's next
// owner: for a script whose answer says what it changed (a CAS, a merge
// answering "advanced"), a second send after a first that ran answers
// "nothing changed" for a change the call made itself. Such a failure is
// returned instead (the caller's answer is then degraded: the write may
// have been applied). A MOVED, ASK or TRYAGAIN reply is still followed:
// a node that answers one ran nothing. Exec runs it again after a
// NOSCRIPT, which ran nothing either.
func EvalShaOnce(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	cmd := redis.NewCmd(ctx, argv...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // the cluster's slot is its first key's
	}
	_ = pipe.Process(ctx, onceCmd{cmd})
	return cmd
}

// onceCmd is a command go-redis does not retry (Cmder.NoRetry).
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

func (c onceCmd) Clone() redis.Cmder {
	if inner, ok := c.Cmd.Clone().(*redis.Cmd); ok {
		return onceCmd{inner}
	}
	return c.Cmd.Clone()
}

// ScanTaggedTails is ScanTagged with what follows each key's tag
// ("" for a key that ends with it): a kind whose keys carry a suffix
// after the tag (a thread's root) reads it there.
func (s *Store) ScanTaggedTails(ctx context.Context, kind string, cur ScanCursor, count int64) ([]string, []string, ScanCursor, error) {
	return s.scanTagged(ctx, kind, cur, count)
}

// ParseGeneration reads the erasure generation a write's script answers
// (as mergeScript's): "-1" is GenerationUnknown.
func ParseGeneration(g string) (int64, error) {
	if g == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(g, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decoding an erasure generation %q: %w", g, err)
	}
	return n, nil
}

// AppendB62 appends n ≥ 0 as a base-62 numeral, the layout's numbers.
func AppendB62(b []byte, n int64) []byte { return appendB62(b, n) }

// ParseB62 inverts AppendB62.
func ParseB62(s string) (int64, error) { return parseB62(s) }

// LuaCommon is the Lua functions of the cursor scripts (cmp(a, b)
// ordering base-62 numerals, a cursor value's parse and merge), for a
// kind's script over values of the same layout to start with.
const LuaCommon = luaCommon

// EncodeHead is a head's value, "SEQ MSG UPDATED_MS" (a channel's, and a
// kind's head of the same layout); h.Channel names it in the error.
func EncodeHead(h channel.Head) (string, error) { return encodeHead(h) }

// ParseHead inverts EncodeHead.
func ParseHead(v string) (seq int64, msg string, at int64, ok bool) { return parseHead(v) }

// MarkLoaded marks hash restored from Postgres (LoadedField) under inc,
// the marker the restore waited for (the zero Incarnation checks none):
// ErrMarkerMoved when the marker moved meanwhile.
func (s *Store) MarkLoaded(ctx context.Context, hash string, inc Incarnation) error {
	return s.markLoaded(ctx, hash, inc)
}

// QueueReadWithGeneration queues on pipe the read of field of a user's
// hash with the user's erasure generation (tomb, the user's
// TombstoneKey) in one script: it answers {generation ("-1":
// GenerationUnknown), value ("" none), "1" when the hash is loaded}, so a
// compare-and-set can later expect both.
func (s *Store) QueueReadWithGeneration(ctx context.Context, pipe redis.Pipeliner, hash, tomb, field string) *redis.Cmd {
	return readMarksScript.EvalSha(ctx, pipe, []string{hash, tomb}, field)
}

// QueueReadsWithGeneration is QueueReadWithGeneration of many fields in
// one script: keys are pairs of a user's hash and tombstone (of one
// cluster slot), fields one per pair; it answers the three values per
// pair.
func (s *Store) QueueReadsWithGeneration(ctx context.Context, pipe redis.Pipeliner, keys []string, fields []any) *redis.Cmd {
	return readMarksScript.EvalSha(ctx, pipe, keys, fields...)
}

// KeySlot is the Redis Cluster slot of key (its hash tag's), for a kind
// that groups the keys of one script call by slot.
func KeySlot(key string) int { return keySlot(key) }

// LuaIntact is the Lua function intact(mk, gen) of a hydrate script: the
// incarnation marker at mk is still of generation gen (the restore's).
const LuaIntact = luaIntact

const luaMergeFields = `
local function mergefields(key, order)
  local out = {}
  for i = 3, #ARGV, 2 do
    local cur = redis.call('HGET', key, ARGV[i])
    if cur and order(ARGV[i+1], cur) <= 0 then
      out[#out+1] = 0 out[#out+1] = cur
    else
      redis.call('HSET', key, ARGV[i], ARGV[i+1])
      out[#out+1] = 1 out[#out+1] = ARGV[i+1]
    end
  end
  if ARGV[1] == "1" then redis.call('HSET', key, ':loaded', '1') end
  if redis.call('HLEN', key) == 1 and redis.call('HEXISTS', key, ':loaded') == 1 then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    redis.call('PERSIST', key)
  end
  return out
end
`

// luaViewCmp orders decimal numerals (LuaCmp).
const luaViewCmp = `
local function cmp(a, b)
  if a == b then return 0 end
  if #a ~= #b then if #a < #b then return -1 else return 1 end end
  if a < b then return -1 end
  return 1
end
`

const (
	// seqWidth is the width of a padded base-62 seq (padSeq).
	seqWidth = 11
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

// readMarksScript reads fields with their users' generations. KEYS =
// pairs of a user hash and that user's tombstone; ARGV = one field per
// pair. Returns per pair the generation ("-1": GenerationUnknown), the
// value ("" none) and "1" when the user's hash is loaded ("0": Redis lost
// it or never restored it, and the value says nothing).
var readMarksScript = redis.NewScript(`
local out = {}
local gens = {}
local loaded = {}
for i = 1, #KEYS, 2 do
  local g = gens[KEYS[i + 1]]
  if not g then
    g = redis.call('HGET', KEYS[i + 1], 'g') or "-1"
    gens[KEYS[i + 1]] = g
  end
  local l = loaded[KEYS[i]]
  local v
  if l then
    v = redis.call('HGET', KEYS[i], ARGV[(i + 1) / 2]) or ""
  else
    local r = redis.call('HMGET', KEYS[i], ARGV[(i + 1) / 2], ':loaded')
    v, l = r[1] or "", r[2] and "1" or "0"
    loaded[KEYS[i]] = l
  end
  out[#out + 1] = g
  out[#out + 1] = v
  out[#out + 1] = l
end
return out
`)
