package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// MGet is a queued read of string keys: one MGET, or on a cluster one per
// slot (an MGET may not cross slots). Its answers are read once the
// pipeline ran.
type MGet struct {
	cmds []*redis.SliceCmd
	// cmd and pos locate key i's answer (nil: one MGET, in key order).
	cmd, pos []int32
}

// QueueMGet queues on pipe the read of keys.
func (s *Store) QueueMGet(ctx context.Context, pipe redis.Pipeliner, keys []string) *MGet {
	r := &MGet{}
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

// Value is key i's answer: a string, or nil when the key is absent.
func (r *MGet) Value(i int) (any, error) {
	c, p := 0, i
	if r.cmd != nil {
		c, p = int(r.cmd[i]), int(r.pos[i])
	}
	vals, err := r.cmds[c].Result()
	if err != nil {
		return nil, err
	}
	return vals[p], nil
}
