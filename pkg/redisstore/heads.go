package redisstore

// Channel heads, deletion counts and group mention tops are string keys, so that those of a
// user's channels read with one MGET (one per cluster slot) rather than a
// command per channel: at a thousand channels, a pipeline of HGETs cost
// Redis and the gateway about 2.5 times as much as one MGET.

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// HeadKey is a channel's head (`SEQ MSG UPDATED_MS`, numbers base 62).
func (s *Store) HeadKey(ch string) string { return s.prefix + "hd:{" + ch + "}" }

// headKeys is, for each channel, HeadKey, DeletionCountKey and
// GroupMentionTopKey (keys 3i, 3i+1 and 3i+2), built in one allocation (at
// a thousand channels, a string each showed in profiles).
func (s *Store) headKeys(channels []string) []string {
	return s.channelStrings(channels, "hd:{", "dn:{", "gt:{")
}

// headOnlyKeys is HeadKey of each channel, for a read without counts
// (queueHeads with counts false).
func (s *Store) headOnlyKeys(channels []string) []string {
	return s.channelStrings(channels, "hd:{")
}

func (s *Store) channelStrings(channels []string, kinds ...string) []string {
	n := 0
	for _, ch := range channels {
		n += len(kinds) * (len(s.prefix) + len("hd:{}") + len(ch))
	}
	var b strings.Builder
	b.Grow(n)
	ends := make([]int, len(kinds)*len(channels))
	for i, ch := range channels {
		for j, kind := range kinds {
			b.WriteString(s.prefix)
			b.WriteString(kind)
			b.WriteString(ch)
			b.WriteByte('}')
			ends[len(kinds)*i+j] = b.Len()
		}
	}
	all := b.String()
	keys := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		keys[i], start = all[start:end], end
	}
	return keys
}

// headsRead is a queued read of heads: one MGET, or on a cluster one per
// slot (an MGET may not cross slots).
type headsRead struct {
	// stride is the keys per channel: 3 with the deletion counts and group
	// mention tops, else 1.
	stride int
	cmds   []*redis.SliceCmd
	// cmd and pos locate key i's answer (nil: one MGET, in key order).
	cmd, pos []int32
}

// queueHeads queues the read of keys (headKeys, or headOnlyKeys when
// counts is false) on pipe.
func (s *Store) queueHeads(ctx context.Context, pipe redis.Pipeliner, keys []string, counts bool) *headsRead {
	r := &headsRead{stride: 1}
	if counts {
		r.stride = 3
	}
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

// get returns channel i's head value, and false when Redis holds none.
func (r *headsRead) get(i int) (string, bool, error) {
	v, err := r.value(r.stride * i)
	s, ok := v.(string)
	return s, ok, err
}

// deletions returns channel i's deletion count as MGET answered it (nil:
// unknown; read after get, which reports the read's error).
func (r *headsRead) deletions(i int) any {
	if r.stride < 2 {
		return nil
	}
	v, _ := r.value(3*i + 1)
	return v
}

// tops returns the group mention top of each of n channels ("": unknown).
func (r *headsRead) tops(n int) []string {
	out := make([]string, n)
	if r.stride < 3 {
		return out
	}
	for i := range out {
		v, _ := r.value(3*i + 2)
		out[i], _ = v.(string)
	}
	return out
}

func (r *headsRead) value(k int) (any, error) {
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
