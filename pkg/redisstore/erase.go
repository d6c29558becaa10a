package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/tombstone"
)

// The erasure of a user. The tombstone lives beside the user's
// keys, in their slot:
//
//	t:{user}   hash: "g" → the erasure generation, "at" → the erasure
//	           time (Unix ms), both decimal; "g" = "0": known never
//	           erased (RememberTombstones, from Postgres; it expires)
//
// Every write's script reads "g" (mergeScript, casScript, the mark-unread
// script, the kinds' write scripts, pkg/kinds/members' among them), so an
// event is stamped with the generation its Redis write is ordered after.
// No hash at all is GenerationUnknown: never looked up, or lost with
// Redis' data (a FLUSHALL); the gateway then asks Postgres and remembers
// the answer here.

// GenerationUnknown is the generation a write's script answers when Redis
// holds no tombstone hash for the user: it cannot tell "never erased"
// from "erased, then lost". The caller looks the tombstone up in Postgres
// (RememberTombstones keeps the answer), and never stamps it on an event.
const GenerationUnknown int64 = -1

// KnownNoneTTL is how long Redis remembers that a user was never erased
// (a "g" of "0"): a user who writes again after it is looked up in
// Postgres again. Real tombstones never expire.
const KnownNoneTTL = 24 * time.Hour

// rememberScript stores a tombstone read from Postgres unless the hash
// exists (an erasure, or another gateway's lookup, came first).
// KEYS[1] = t:{user}; ARGV = generation ("0": none), time, TTL in ms for
// a "0".
var rememberScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'g', ARGV[1], 'at', ARGV[2])
if ARGV[1] == "0" then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
`)

// RememberTombstones stores, for each of users, its tombstone as Postgres
// holds it (pg; none: known never erased, for KnownNoneTTL), where Redis
// holds no tombstone hash yet, in one pipelined round trip.
func (s *Store) RememberTombstones(ctx context.Context, users []string, pg tombstone.Set) error {
	if len(users) == 0 {
		return nil
	}
	ttl := strconv.FormatInt(KnownNoneTTL.Milliseconds(), 10)
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, u := range users {
			t := pg[u]
			rememberScript.EvalSha(ctx, pipe, []string{s.TombstoneKey(u)},
				strconv.FormatInt(t.Generation, 10), strconv.FormatInt(t.ErasedAtUnixMs, 10), ttl)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: remembering the tombstones of %d users: %w", ErrUnavailable, len(users), err)
	}
	return nil
}

// mentionScanCount is the SCAN page size over one user's mention keys.
const mentionScanCount = 256

// TombstoneKey is a user's erasure tombstone.
func (s *Store) TombstoneKey(user string) string { return s.prefix + "t:{" + user + "}" }

// eraseScript raises the tombstone and resets the kinds' user hashes
// (KEYS[3] on: deleted, or left empty and complete where ARGV says so, as
// the cursor, membership, mention and thread register hashes are, so that
// a read never falls back to Postgres rows the persister has not deleted
// yet, nor re-populates Redis from them; a mention or register written
// after the script read the new generation must survive the erasure; a
// hash left complete keeps its counters at "0", as the membership hash
// its count of left registers) in one step.
// The channels the fields of a kind's hash name (ARGV says so: a cursor's
// field is its channel, a membership or thread register's starts with
// it) are added to the erasure's pending set (KEYS[2]) before anything is
// deleted; each channel leaves it once cleaned (Erase), so an erasure cut
// short is finished by its retry or by FinishErasures, even though the
// hashes that named the channels are gone.
// KEYS = t, the pending set, then the kinds' hashes;
// ARGV = the erasure time (Unix ms, decimal), the least generation
// (decimal), then per kind hash "1" (left complete) or "0" (deleted),
// followed by "c" when its fields name channels ("-" when not), then by
// the counters it keeps at "0", each after a space.
// Returns {generation, time, then the pending channels}.
// Generations and times are below 2^53, exact as Lua numbers.
var eraseScript = redis.NewScript(`
local g = tonumber(redis.call('HGET', KEYS[1], 'g') or "0")
local now = tonumber(ARGV[1])
local ng = g + 1
if now > ng then ng = now end
if tonumber(ARGV[2]) > ng then ng = tonumber(ARGV[2]) end
local gs = string.format("%d", ng)
redis.call('HSET', KEYS[1], 'g', gs, 'at', ARGV[1])
redis.call('PERSIST', KEYS[1])
local out = {gs, ARGV[1]}
local function pend(ch)
  if #ch > 0 then redis.call('SADD', KEYS[2], ch) end
end
for i = 3, #KEYS do
  if string.sub(ARGV[i], 2, 2) == "c" then
    for _, f in ipairs(redis.call('HKEYS', KEYS[i])) do
      if string.sub(f, 1, 1) ~= ":" then pend(string.match(f, "^[^ ]+") or "") end
    end
  end
end
for _, ch in ipairs(redis.call('SMEMBERS', KEYS[2])) do out[#out+1] = ch end
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
  if string.sub(ARGV[i], 1, 1) == "1" then
    redis.call('HSET', KEYS[i], ':loaded', '1')
    for c in string.gmatch(string.sub(ARGV[i], 3), "[^ ]+") do redis.call('HSET', KEYS[i], c, '0') end
  end
end
return out
`)

// Erase removes every trace of user from Redis and raises the user's
// tombstone to a new generation (tombstone.NextGeneration of the stored
// one and nowMs, and at least least: a generation above the one Postgres
// holds, which a Redis that lost its data no longer knows), which it
// returns: kindHashes (the user's hashes of the kinds:
// kind.ErasedHashes; keys in the user's slot, the cursor and the
// membership hashes among them), each deleted
// or left empty and complete as it says, the earlier layout's mention
// sets, and in every channel the user had state in redact there (the
// kinds' part of the erasure and redactions, then the views' cleaning:
// the membership kind's register, a group mention's sender, the read-by
// view's cursors and stream entries). The first step is atomic with
// every write's script; the earlier layout's mention sets and the
// channels follow (other slots): a failure there returns an error and
// the caller retries the whole erasure, which is harmless (a newer
// generation, nothing left to delete).
func (s *Store) Erase(ctx context.Context, user string, nowMs, least int64, kindHashes []ErasedHash, redact Redact) (tombstone.Tombstone, error) {
	keys := []string{s.TombstoneKey(user), s.ErasurePendingKey(user)}
	argv := []any{strconv.FormatInt(nowMs, 10), strconv.FormatInt(least, 10)}
	for _, h := range kindHashes {
		mark := "0"
		if h.Complete {
			mark = "1"
		}
		if h.Channels {
			mark += "c"
		} else if len(h.Counters) > 0 {
			mark += "-"
		}
		for _, c := range h.Counters {
			mark += " " + c
		}
		keys, argv = append(keys, h.Key), append(argv, mark)
	}
	res, err := eraseScript.Run(ctx, s.rdb, keys, argv...).StringSlice()
	if err != nil {
		return tombstone.Tombstone{}, fmt.Errorf("%w: erasing %s: %w", ErrUnavailable, user, err)
	}
	gen, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return tombstone.Tombstone{}, fmt.Errorf("erasing %s: generation %q: %w", user, res[0], err)
	}
	t := tombstone.Tombstone{User: user, Generation: gen, ErasedAtUnixMs: nowMs}
	if err := s.deleteMentionSets(ctx, user); err != nil {
		return t, err
	}
	return t, s.eraseChannels(ctx, user, res[2:], redact)
}

// ErasedHash is a user's hash of a kind that owns its layout, which an
// erasure's first step deletes (Erase); Complete leaves it holding
// LoadedField alone, so a read trusts it empty and never falls back to
// Postgres rows not deleted yet.
//
// Channels says its fields start with a channel id (up to a space;
// markers apart): the erasure cleans those channels too, as those of the
// user's cursors, so that a channel the user had only such state in (a
// thread register) is cleaned as well.
//
// Counters are marker fields (starting with ':', no space) a hash left
// complete keeps at "0": counts of its fields that the kind's scripts
// keep only in a hash made with them (the membership hash's count of
// left registers), so the emptied hash still counts.
type ErasedHash struct {
	Key      string
	Complete bool
	Channels bool
	Counters []string
}

// Redact is the cleaning of user out of channel ch's keys, none of which
// are the store's: the kinds' part of the erasure there (the user's
// membership register in the channel's hash) and their redactions, where
// the kinds' state names the user but is not theirs (a group mention's
// sender: kind.RedisRedact), and a view's (the read-by view's cursors
// and stream entries). An erasure runs it in each channel the user had
// state in, before the channel leaves the pending set, so a failure is
// retried with the channel (Erase, FinishErasures). nil: none.
type Redact func(ctx context.Context, user, ch string) error

// ErasurePendingKey is the set of channels an erasure of user has yet to
// clean (the user's slot).
func (s *Store) ErasurePendingKey(user string) string { return s.prefix + "ep:{" + user + "}" }

// eraseChannels has the kinds and the views clean the user out of each
// channel (redact) and takes it off the erasure's pending set; the set
// goes with its last channel.
func (s *Store) eraseChannels(ctx context.Context, user string, channels []string, redact Redact) error {
	for _, ch := range channels {
		if redact != nil {
			if err := redact(ctx, user, ch); err != nil {
				return fmt.Errorf("erasing %s from channel %s: %w", user, ch, err)
			}
		}
		if err := s.rdb.SRem(ctx, s.ErasurePendingKey(user), ch).Err(); err != nil {
			return fmt.Errorf("%w: erasing %s: %w", ErrUnavailable, user, err)
		}
	}
	return nil
}

// FinishErasures finishes the erasures cut short (a call that failed
// midway and was not retried, a gateway that stopped): it walks the
// pending sets, in bounded pages, and cleans their channels. It returns
// how many channels it cleaned; redact as for Erase.
func (s *Store) FinishErasures(ctx context.Context, redact Redact) (int, error) {
	n := 0
	var cur ScanCursor
	for !cur.Done() {
		keys, next, err := s.scanKeys(ctx, cur, 100, s.prefix+"ep:{*}")
		if err != nil {
			return n, err
		}
		cur = next
		for _, k := range keys {
			user, ok := strings.CutPrefix(k, s.prefix+"ep:{")
			if !ok || !strings.HasSuffix(user, "}") {
				continue
			}
			user = strings.TrimSuffix(user, "}")
			chs, err := s.rdb.SMembers(ctx, k).Result()
			if err != nil {
				return n, fmt.Errorf("%w: reading the pending erasure of %s: %w", ErrUnavailable, user, err)
			}
			if err := s.eraseChannels(ctx, user, chs, redact); err != nil {
				return n, err
			}
			n += len(chs)
		}
	}
	return n, nil
}

// deleteMentionSets deletes any mention sets of the earlier layout (a
// sorted set per channel, "mn:{user}:<channel>"), found by SCAN over the
// user's tag on the node that holds the user's slot: mentions stored
// before an upgrade are erased too.
func (s *Store) deleteMentionSets(ctx context.Context, user string) error {
	pattern := globEscape(s.prefix+"mn:{"+user+"}:") + "*"
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, s.TombstoneKey(user))
		if err != nil {
			return fmt.Errorf("%w: finding the master of %s: %w", ErrUnavailable, user, err)
		}
		node = c
	}
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, pattern, mentionScanCount).Result()
		if err != nil {
			return fmt.Errorf("%w: scanning the mention sets of %s: %w", ErrUnavailable, user, err)
		}
		if len(keys) > 0 {
			// One slot (the {user} tag): one DEL for the page.
			if err := node.Del(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("%w: deleting the mention sets of %s: %w", ErrUnavailable, user, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Tombstone returns the user's tombstone as Redis holds it (the zero
// value when never erased, or lost with a FLUSHALL).
func (s *Store) Tombstone(ctx context.Context, user string) (tombstone.Tombstone, error) {
	ts, err := s.Tombstones(ctx, []string{user})
	if err != nil {
		return tombstone.Tombstone{}, err
	}
	return ts[user], nil
}

// Tombstones returns the tombstones of those of users that Redis knows as
// erased, in one pipelined round trip.
func (s *Store) Tombstones(ctx context.Context, users []string) (tombstone.Set, error) {
	out := tombstone.Set{}
	if len(users) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(users))
	for i, u := range users {
		cmds[i] = pipe.HMGet(ctx, s.TombstoneKey(u), "g", "at")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("%w: reading tombstones: %w", ErrUnavailable, err)
	}
	for i, c := range cmds {
		vals := c.Val()
		g, _ := vals[0].(string)
		at, _ := vals[1].(string)
		if g == "" || g == "0" {
			continue // none, or known never erased
		}
		t := tombstone.Tombstone{User: users[i]}
		var err error
		if t.Generation, err = strconv.ParseInt(g, 10, 64); err != nil {
			return nil, fmt.Errorf("decoding the tombstone of %s: %q: %w", users[i], g, err)
		}
		if t.ErasedAtUnixMs, err = strconv.ParseInt(at, 10, 64); err != nil {
			return nil, fmt.Errorf("decoding the tombstone of %s: %q: %w", users[i], at, err)
		}
		out.Add(t)
	}
	return out, nil
}

// globEscape escapes the SCAN pattern characters in s (ids may hold them).
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
