package kind

import (
	"context"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Digest summarises a value that is a large set (a channel's deletions,
// up to a million seqs) for the drift sweep: its size and its bounds
// within its retention. The zero Digest is no value. Two stores' sets of
// one key, each a union of the same writes, differ without their digests
// differing only when each holds a seq the other lacks, in equal numbers
// and inside the same bounds: a double fault the sweep leaves to the next
// write of the set.
type Digest = channel.SetDigest

// Digests are a kind's digest reads, every one required: PGPage pages
// Postgres' keys in key order with their digests (as Spec.PGPage does
// values), PG and Redis read the digests of keys (zero: none), RedisScan
// is one SCAN page of the keys Redis holds values of (Values unused).
type Digests[K comparable] struct {
	PGPage    func(ctx context.Context, env *Env, after K, hasAfter bool, n int) ([]K, []Digest, error)
	PG        func(ctx context.Context, env *Env, keys []K) ([]Digest, error)
	Redis     func(ctx context.Context, env *Env, keys []K) ([]Digest, error)
	RedisScan func(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) ([]K, ScanPage[struct{}], error)
}

// DigestKind is a kind's Digests with the key type erased (nil: the kind
// is compared value by value).
type DigestKind interface {
	PagePG(ctx context.Context, env *Env, after any, n int) ([]any, []Digest, error)
	PG(ctx context.Context, env *Env, keys []any) ([]Digest, error)
	Redis(ctx context.Context, env *Env, keys []any) ([]Digest, error)
	ScanRedis(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) ([]any, ScanPage[struct{}], error)
}

func (k kind[K, V]) Digested() DigestKind {
	if k.s.Digests == nil {
		return nil
	}
	return digestKind[K]{k.s.Digests}
}

type digestKind[K comparable] struct{ d *Digests[K] }

func (d digestKind[K]) PagePG(ctx context.Context, env *Env, after any, n int) ([]any, []Digest, error) {
	var a K
	if after != nil {
		a = after.(K)
	}
	keys, ds, err := d.d.PGPage(ctx, env, a, after != nil, n)
	return box(keys), ds, err
}

func (d digestKind[K]) PG(ctx context.Context, env *Env, keys []any) ([]Digest, error) {
	return d.d.PG(ctx, env, unbox[K](keys))
}

func (d digestKind[K]) Redis(ctx context.Context, env *Env, keys []any) ([]Digest, error) {
	return d.d.Redis(ctx, env, unbox[K](keys))
}

func (d digestKind[K]) ScanRedis(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) ([]any, ScanPage[struct{}], error) {
	keys, page, err := d.d.RedisScan(ctx, env, cur, count)
	return box(keys), page, err
}
