package redisstore

// SCAN pages of a kind's keys, for the drift sweep (every master of a
// cluster in turn).

import (
	"context"
	"strings"
)

// scanTagged returns one SCAN page of the ids in keys "<prefix><kind>{id}…"
// (with what follows the tag) and the cursor of the next page; in Redis
// Cluster the walk visits every master (ScanCursor).
func (s *Store) scanTagged(ctx context.Context, kind string, cur ScanCursor, count int64) ([]string, []string, ScanCursor, error) {
	keys, next, err := s.scanKeys(ctx, cur, count, s.prefix+kind+"{*")
	ids := make([]string, 0, len(keys))
	rests := make([]string, 0, len(keys))
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, s.prefix+kind+"{")
		if !ok {
			continue
		}
		id, tail, ok := strings.Cut(rest, "}")
		if !ok || id == "" {
			continue
		}
		ids, rests = append(ids, id), append(rests, tail)
	}
	return ids, rests, next, err
}

// ScanTagged returns one SCAN page of the ids of the keys
// "<prefix><kind>{id}" (a kind of state's keys, e.g. kind "c:" for the
// channels' hashes) and the cursor of the next page; in Redis Cluster the
// walk visits every master (ScanCursor).
func (s *Store) ScanTagged(ctx context.Context, kind string, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, kind, cur, count)
	return onlyWhole(ids, rests), next, err
}

func onlyWhole(ids, rests []string) []string {
	out := ids[:0]
	for i, id := range ids {
		if rests[i] == "" {
			out = append(out, id)
		}
	}
	return out
}
