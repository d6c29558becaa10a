package drift

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A kind whose values are large sets (kind.Spec.Digests: a channel's
// deletions, up to a million seqs) is swept by digest: each page compares
// the stores' digests (sizes and bounds, read without reading a set) and
// reads whole only the sets whose digests differ, a few at a time
// (wholeReadSeqs), to compare and repair them as any value.

// wholeReadSeqs bounds the seqs one read of whole sets carries (at least
// one set: a set is bounded by its window).
const wholeReadSeqs = 100_000

func (s *Sweeper) sweepPostgresDigests(ctx context.Context, lim *rate.Limiter, rep *Report, k kind.Kind, dk kind.DigestKind) error {
	rep.byKind(k.Name()) // reported when nothing differs, as every kind
	var after any
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		keys, pgd, err := dk.PagePG(ctx, &s.env, after, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("reading a postgres page of %s digests: %w", k.Name(), err)
		}
		rep.Pages++
		if len(keys) == 0 {
			return nil
		}
		rep.PostgresRows += len(keys)
		after = keys[len(keys)-1]
		rd, err := dk.Redis(ctx, &s.env, keys)
		if err != nil {
			return fmt.Errorf("reading %d redis digests of %s: %w", len(keys), k.Name(), err)
		}
		var differ []any
		var sizes []int64
		for i := range keys {
			if pgd[i] != rd[i] {
				differ, sizes = append(differ, keys[i]), append(sizes, max(pgd[i].Count, rd[i].Count))
			}
		}
		if err := s.compareWhole(ctx, rep, k, differ, sizes); err != nil {
			return err
		}
		if len(keys) < s.cfg.PageSize {
			return nil
		}
	}
}

func (s *Sweeper) sweepRedisDigests(ctx context.Context, lim *rate.Limiter, rep *Report, k kind.Kind, dk kind.DigestKind) error {
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		keys, page, err := dk.ScanRedis(ctx, &s.env, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis %s (%s): %w", k.Name(), cursor, err)
		}
		rep.Pages++
		rep.RedisUsers += page.Scanned
		rep.RedisFields += len(keys) + page.Invalid
		rep.Invalid += page.Invalid
		// The sets Postgres has none of: the Postgres walk compared the rest.
		var missing []any
		for start := 0; start < len(keys); start += pgPageChunk {
			chunk := keys[start:min(start+pgPageChunk, len(keys))]
			pgd, err := dk.PG(ctx, &s.env, chunk)
			if err != nil {
				return fmt.Errorf("reading postgres digests of %d keys of %s: %w", len(chunk), k.Name(), err)
			}
			for i, d := range pgd {
				if d == (kind.Digest{}) {
					missing = append(missing, chunk[i])
				}
			}
		}
		if len(missing) > 0 {
			rd, err := dk.Redis(ctx, &s.env, missing)
			if err != nil {
				return fmt.Errorf("reading %d redis digests of %s: %w", len(missing), k.Name(), err)
			}
			sizes := make([]int64, len(rd))
			for i, d := range rd {
				sizes[i] = d.Count
			}
			if err := s.compareWhole(ctx, rep, k, missing, sizes); err != nil {
				return err
			}
		}
		if cursor = page.Next; cursor.Done() {
			return nil
		}
	}
}

// compareWhole reads keys' values whole from both stores, in groups of at
// most wholeReadSeqs (by sizes, the larger digest's count of each), and
// compares and repairs them.
func (s *Sweeper) compareWhole(ctx context.Context, rep *Report, k kind.Kind, keys []any, sizes []int64) error {
	for start := 0; start < len(keys); {
		end, seqs := start+1, sizes[start]
		for end < len(keys) && seqs+sizes[end] <= wholeReadSeqs {
			seqs += sizes[end]
			end++
		}
		group := keys[start:end]
		start = end
		rep.ReadWhole += len(group)
		rows, err := k.GetPG(ctx, &s.env, group)
		if err != nil {
			return fmt.Errorf("reading postgres rows of %d keys of %s: %w", len(group), k.Name(), err)
		}
		inPG := make(map[any]any, len(rows))
		for _, r := range rows {
			inPG[k.KeyOf(r)] = r
		}
		held, err := k.GetRedis(ctx, &s.env, group)
		if err != nil {
			return fmt.Errorf("reading %d redis values of %s: %w", len(group), k.Name(), err)
		}
		w := &work{kind: k, sampleRoom: MaxSamples - len(rep.Samples)}
		for i, key := range group {
			s.compare(w, key, inPG[key], held[i])
		}
		if err := s.apply(ctx, w, rep); err != nil {
			return err
		}
	}
	return nil
}
