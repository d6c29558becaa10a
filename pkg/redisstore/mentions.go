package redisstore

// A user's mentions: one hash per user, channel → the kept seqs.

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// mentionScript adds seqs to a user's mentions in one channel and keeps
// the newest cap+1. KEYS[1] = the user's mention hash, KEYS[2] (optional)
// = the user's tombstone (the same {user} slot); ARGV = cap+1, the
// channel, then padded seqs. A stored member of another width (garbled)
// is dropped. Sorted by bytes (Lua's '<' on strings follows the server's
// LC_COLLATE). Returns how many are kept, or with KEYS[2] the user's
// erasure generation (decimal, "-1": GenerationUnknown), read in the
// script that writes, so the event stamped with it is ordered against an
// erasure as its Redis write is (as mergeScript).
var mentionScript = redis.NewScript(`
local function less(a, b)
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local seen, list = {}, {}
local function add(m)
  if #m == 11 and not seen[m] then seen[m] = true list[#list+1] = m end
end
local cur = redis.call('HGET', KEYS[1], ARGV[2])
if cur then for m in string.gmatch(cur, "%S+") do add(m) end end
for i = 3, #ARGV do add(ARGV[i]) end
table.sort(list, less)
local from = math.max(1, #list - tonumber(ARGV[1]) + 1)
redis.call('HSET', KEYS[1], ARGV[2], table.concat(list, " ", from, #list))
if KEYS[2] then return redis.call('HGET', KEYS[2], 'g') or "-1" end
return #list - from + 1
`)

// AddMentions adds mention seqs to their users' mentions, each channel's
// kept to its newest cap+1, in one pipeline. The caller adds mentions of
// members only.
func (s *Store) AddMentions(ctx context.Context, ms []channel.Mentions, mentionCap int) error {
	_, err := s.AddMentionsReadingGenerations(ctx, ms, mentionCap)
	return err
}

// AddMentionsReadingGenerations is AddMentions returning, per entry of
// ms, the user's erasure generation read in the script that added it
// (GenerationUnknown: no tombstone in Redis; 0 for an entry without
// seqs, which is not written): the gateway stamps it on the mention's
// event.
func (s *Store) AddMentionsReadingGenerations(ctx context.Context, ms []channel.Mentions, mentionCap int) ([]int64, error) {
	cmds := make([]*redis.Cmd, len(ms))
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, m := range ms {
			if len(m.Seqs) == 0 {
				continue
			}
			argv := make([]any, 0, 2+len(m.Seqs))
			argv = append(argv, mentionCap+1, m.Key.Channel)
			for _, q := range m.Seqs {
				argv = append(argv, padSeq(q))
			}
			cmds[i] = mentionScript.EvalSha(ctx, pipe, []string{s.UserMentionsKey(m.Key.User), s.TombstoneKey(m.Key.User)}, argv...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("adding mentions: %w", err)
	}
	gens := make([]int64, len(ms))
	for i, c := range cmds {
		if c == nil {
			continue
		}
		g, err := c.Text()
		if err == nil {
			gens[i], err = parseGeneration(g)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: adding mentions: %w", ErrUnavailable, err)
		}
	}
	return gens, nil
}

// MentionSeqs returns the kept seqs of each key, ascending (nil: none).
func (s *Store) MentionSeqs(ctx context.Context, keys []receipt.Key) ([][]int64, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.UserMentionsKey(k.User), k.Channel)
		}
	}); err != nil {
		return nil, err
	}
	out := make([][]int64, len(keys))
	err := s.readEach(cmds, func(i int, v string) error {
		seqs, err := decodeMentions(keys[i], v)
		out[i] = seqs
		return err
	})
	return out, err
}

// UserMentions returns every channel's kept mention seqs of a user, and
// whether the hash is hydrated.
func (s *Store) UserMentions(ctx context.Context, user string) ([]channel.Mentions, bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.UserMentionsKey(user)).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: reading the mentions of %s: %w", ErrUnavailable, user, err)
	}
	_, complete := m[loadedField]
	out := make([]channel.Mentions, 0, len(m))
	for ch, v := range m {
		if strings.HasPrefix(ch, ":") {
			continue
		}
		k := receipt.Key{User: user, Channel: ch}
		seqs, err := decodeMentions(k, v)
		if err != nil {
			s.skipUndecodable()
			continue
		}
		out = append(out, channel.Mentions{Key: k, Seqs: seqs})
	}
	return out, complete, nil
}

// decodeMentions decodes a stored mention list (nil when it holds none).
func decodeMentions(k receipt.Key, v string) ([]int64, error) {
	var out []int64
	for m := range strings.FieldsSeq(v) {
		q, err := parsePadded(m)
		if err != nil || len(m) != seqWidth {
			return nil, fmt.Errorf("decoding the redis mentions of %s: %q", k.KafkaKey(), m)
		}
		out = append(out, q)
	}
	return out, nil
}

// countMentionsAbove counts the members of a stored mention list above
// bound (a padded seq): byte order is numeric order, and the list is
// ascending, so the count is read from the end without decoding.
func countMentionsAbove(v string, bound []byte) int64 {
	var n int64
	for v != "" {
		i := strings.LastIndexByte(v, ' ')
		if v[i+1:] <= string(bound) {
			break
		}
		n++
		if i < 0 {
			break
		}
		v = v[:i]
	}
	return n
}
