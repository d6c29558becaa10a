package redisstore

// A channel's head, deletion count and group mention top are one string
// key, hd:{channel}, so that those of a user's channels read with one MGET
// (one per cluster slot) of one key per channel: at a thousand channels a
// pipeline of HGETs cost Redis and the gateway about 2.5 times as much as
// one MGET, and an MGET of three keys per channel about 2 times as much as
// one of one (each key a lookup in the keyspace, mostly a cache miss).
//
// The value is `SEQ MSG UPDATED_MS DELETIONS GROUP_TOP`: the head (SEQ
// "-" when Redis does not know it), the size of the channel's deletion set
// (pkg/kinds/deletions) and its greatest group mention seq, padded
// (pkg/kinds/groupmentions); "-" for either, or a value of the head alone (older
// builds'), means not known: read Postgres and hydrate. The scripts that
// write one part keep the others (luaChannelValue).

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// HeadKey is a channel's head (`SEQ MSG UPDATED_MS`, numbers base 62).
func (s *Store) HeadKey(ch string) string { return s.prefix + "hd:{" + ch + "}" }

// headKeys is HeadKey of each channel, built in one allocation (at a
// thousand channels, a string each showed in profiles).
func headKeys(prefix string, channels []string) []string {
	n := 0
	for _, ch := range channels {
		n += len(prefix) + len("hd:{}") + len(ch)
	}
	var b strings.Builder
	b.Grow(n)
	ends := make([]int, len(channels))
	for i, ch := range channels {
		b.WriteString(prefix)
		b.WriteString("hd:{")
		b.WriteString(ch)
		b.WriteByte('}')
		ends[i] = b.Len()
	}
	all := b.String()
	keys := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		keys[i], start = all[start:end], end
	}
	return keys
}

// ChannelValues is a queued read of channel values (heads, deletion
// counts and group mention tops): one MGET, or on a cluster one per slot
// (an MGET may not cross slots). Its answers are read once the pipeline
// ran.
type ChannelValues struct {
	cmds []*redis.SliceCmd
	// cmd and pos locate key i's answer (nil: one MGET, in key order).
	cmd, pos []int32
}

// QueueChannelValues queues on pipe the read of the channel values of
// channels (the unread and inbox reads' heads, with the read of a
// user's hashes).
func (s *Store) QueueChannelValues(ctx context.Context, pipe redis.Pipeliner, channels []string) *ChannelValues {
	keys := headKeys(s.prefix, channels)
	r := &ChannelValues{}
	if len(keys) == 0 {
		return r
	}
	if _, cluster := s.rdb.(*redis.ClusterClient); !cluster {
		r.cmds = []*redis.SliceCmd{pipe.MGet(ctx, keys...)}
		return r
	}
	bySlot := map[int]int32{}
	var groups [][]string
	r.cmd, r.pos = make([]int32, len(keys)), make([]int32, len(keys))
	for i, k := range keys {
		slot := keySlot(k)
		g, ok := bySlot[slot]
		if !ok {
			g = int32(len(groups))
			bySlot[slot] = g
			groups = append(groups, nil)
		}
		r.cmd[i], r.pos[i] = g, int32(len(groups[g]))
		groups[g] = append(groups[g], k)
	}
	for _, g := range groups {
		r.cmds = append(r.cmds, pipe.MGet(ctx, g...))
	}
	return r
}

// Head returns channel i's head (`SEQ MSG UPDATED_MS`: DecodeHead), and
// false when Redis does not know it.
func (r *ChannelValues) Head(i int) (string, bool, error) {
	v, err := r.value(i)
	head, known, _, _ := splitChannelValue(v)
	return head, known, err
}

// Deletions returns channel i's deletion count ("": unknown; read after
// Head, which reports the read's error).
func (r *ChannelValues) Deletions(i int) string {
	v, _ := r.value(i)
	_, _, dn, _ := splitChannelValue(v)
	return dn
}

// Tops returns the group mention top (padded) of each of the first n
// channels ("": unknown).
func (r *ChannelValues) Tops(n int) []string {
	out := make([]string, n)
	for i := range out {
		v, _ := r.value(i)
		_, _, _, out[i] = splitChannelValue(v)
	}
	return out
}

func (r *ChannelValues) value(k int) (any, error) {
	c, p := 0, k
	if r.cmd != nil {
		c, p = int(r.cmd[k]), int(r.pos[k])
	}
	vals, err := r.cmds[c].Result()
	if err != nil {
		return nil, err
	}
	return vals[p], nil
}

// unknownPart marks a part of a channel value Redis does not know.
const unknownPart = "-"

// splitChannelValue splits a channel value (nil: no key) into its head,
// deletion count and group mention top; known is false, and the others
// "", where Redis does not know them.
func splitChannelValue(v any) (head string, known bool, deletions, top string) {
	s, ok := v.(string)
	if !ok || s == "" {
		return "", false, "", ""
	}
	// The head's three fields, then the two parts (or none: an older
	// build's value).
	end, spaces := len(s), 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if spaces++; spaces == 3 {
				end = i
				break
			}
		}
	}
	head, rest := s[:end], ""
	if end < len(s) {
		rest = s[end+1:]
	}
	known = !strings.HasPrefix(head, unknownPart+" ")
	if !known {
		head = ""
	}
	if d, t, ok := strings.Cut(rest, " "); ok {
		if d != unknownPart {
			deletions = d
		}
		if t != unknownPart {
			top = t
		}
	}
	return head, known, deletions, top
}

// luaChannelValue reads and writes channel values in scripts: cvget(key)
// is the five parts ("-" where not known), cvset(key, parts) writes them.
const luaChannelValue = `
local function cvget(k)
  local v = redis.call('GET', k)
  if not v then return {"-", "-", "-", "-", "-"} end
  local f, i = {}, 1
  while #f < 4 do
    local j = string.find(v, " ", i, true)
    if not j then break end
    f[#f+1] = string.sub(v, i, j - 1)
    i = j + 1
  end
  f[#f+1] = string.sub(v, i)
  if #f < 5 then f[4], f[5] = "-", "-" end
  return f
end
local function cvset(k, f)
  local v = table.concat(f, " ", 1, 5)
  redis.call('SET', k, v)
  return v
end
`
