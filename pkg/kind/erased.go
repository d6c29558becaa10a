package kind

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Kind is a Spec with its types erased: what the loops over every kind
// (the drift sweep, dead-letter repair, the differential test) call.
// Values and keys travel boxed in any; each call unboxes them into the
// Spec's own types, so a kind's functions stay typed. The persister's
// hot path does not box: its window part (NewPart) is typed.
type Kind interface {
	Name() string

	KeyOf(v any) any
	RecordKeyOf(k any) string
	UserOf(k any) string // "" for state that belongs to no user
	TimeOf(v any) int64
	ZeroOf(k any) any
	IsEmpty(v any) bool
	MergeValues(env *Env, a, b any) any
	SameValues(a, b any) bool
	FromEvent(d *event.Decoded) (any, bool)
	// PayloadType is the type of the kind's own payload (Spec.Payload),
	// false for a kind pkg/event decodes; DecodePayload decodes one.
	PayloadType() (event.PayloadType, bool)
	DecodePayload(e event.RecordEnvelope, b []byte) (any, error)

	WritePG(ctx context.Context, env *Env, vals []any) (int64, error)
	GetPG(ctx context.Context, env *Env, keys []any) ([]any, error)
	// PagePG reads up to n rows after the key after (nil: from the start).
	PagePG(ctx context.Context, env *Env, after any, n int) ([]any, error)
	WriteRedis(ctx context.Context, env *Env, vals []any) ([]error, error)
	GetRedis(ctx context.Context, env *Env, keys []any) ([][]any, error)
	ScanRedis(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) (ScanPage[any], error)

	// Scripts are the kind's Redis scripts (Spec.Scripts).
	Scripts() []*redis.Script
	// ErasedHashes are the user's hashes an erasure resets and
	// DeletedHashes those it deletes (nil: none); PGErase deletes the
	// user's rows ("": none). See erase.go.
	ErasedHashes(env *Env, user string) []string
	// ErasedNameChannels: the fields of ErasedHashes start with a channel.
	ErasedNameChannels() bool
	// ErasedCounters: the counters ErasedHashes keep at "0".
	ErasedCounters() []string
	DeletedHashes(env *Env, user string) []string
	PGErase() string
	// PGChannels answers the channels the user's rows name ("": none).
	PGChannels() string
	// PGRedact redacts the user in rows not theirs ("": none), and
	// PGRedacted names the columns it redacts (Spec.PGRedact).
	PGRedact() string
	PGRedacted() []string
	// RedactRedis redacts user in channel ch's keys (Spec.RedisRedact; a
	// kind without one does nothing).
	RedactRedis(ctx context.Context, env *Env, user, ch string) error

	// Digested is the kind's digest reads (nil: none; digest.go).
	Digested() DigestKind

	// NewPart starts the kind's part of a persister window, sized for
	// about sizeHint keys.
	NewPart(env *Env, sizeHint int) Part
}

// New registers the types of a Spec: the one step between describing a
// kind and every loop handling it.
func New[K comparable, V any](s *Spec[K, V]) Kind { return kind[K, V]{s} }

type kind[K comparable, V any] struct{ s *Spec[K, V] }

func (k kind[K, V]) Name() string { return k.s.Name }

func (k kind[K, V]) KeyOf(v any) any            { return k.s.Key(v.(V)) }
func (k kind[K, V]) RecordKeyOf(key any) string { return k.s.RecordKey(key.(K)) }
func (k kind[K, V]) TimeOf(v any) int64         { return k.s.Time(v.(V)) }
func (k kind[K, V]) ZeroOf(key any) any         { return k.s.Zero(key.(K)) }
func (k kind[K, V]) IsEmpty(v any) bool         { return k.s.Empty(v.(V)) }
func (k kind[K, V]) SameValues(a, b any) bool   { return k.s.Same(a.(V), b.(V)) }

func (k kind[K, V]) UserOf(key any) string {
	if k.s.User == nil {
		return ""
	}
	return k.s.User(key.(K))
}

func (k kind[K, V]) Scripts() []*redis.Script { return k.s.Scripts }
func (k kind[K, V]) PGErase() string          { return k.s.PGErase }
func (k kind[K, V]) PGChannels() string       { return k.s.PGChannels }
func (k kind[K, V]) PGRedact() string         { return k.s.PGRedact }
func (k kind[K, V]) PGRedacted() []string     { return k.s.PGRedacted }

func (k kind[K, V]) RedactRedis(ctx context.Context, env *Env, user, ch string) error {
	if k.s.RedisRedact == nil {
		return nil
	}
	return k.s.RedisRedact(ctx, env, user, ch)
}

func (k kind[K, V]) ErasedHashes(env *Env, user string) []string {
	if k.s.ErasedHashes == nil {
		return nil
	}
	return k.s.ErasedHashes(env, user)
}

func (k kind[K, V]) ErasedNameChannels() bool { return k.s.ErasedNameChannels }

func (k kind[K, V]) ErasedCounters() []string { return k.s.ErasedCounters }

func (k kind[K, V]) DeletedHashes(env *Env, user string) []string {
	if k.s.DeletedHashes == nil {
		return nil
	}
	return k.s.DeletedHashes(env, user)
}

func (k kind[K, V]) MergeValues(env *Env, a, b any) any { return k.s.Merge(env, a.(V), b.(V)) }

func (k kind[K, V]) FromEvent(d *event.Decoded) (any, bool) {
	v, ok := k.s.fromEvent(d)
	if !ok {
		return nil, false
	}
	return v, true
}

// WritePG sorts the values by key (a statement writes in key order),
// keeps one per key, merged, and applies the kind's retention.
func (k kind[K, V]) WritePG(ctx context.Context, env *Env, vals []any) (int64, error) {
	sorted := k.sortedUnique(env, vals)
	n, err := k.s.PGWrite(ctx, env, sorted)
	if err == nil && k.s.PGTrim != nil {
		_, err = k.s.PGTrim(ctx, env, sorted)
	}
	return n, err
}

func (k kind[K, V]) GetPG(ctx context.Context, env *Env, keys []any) ([]any, error) {
	got, err := k.s.PGGet(ctx, env, unbox[K](keys))
	return box(got), err
}

func (k kind[K, V]) PagePG(ctx context.Context, env *Env, after any, n int) ([]any, error) {
	var a K
	if after != nil {
		a = after.(K)
	}
	got, err := k.s.PGPage(ctx, env, a, after != nil, n)
	return box(got), err
}

func (k kind[K, V]) WriteRedis(ctx context.Context, env *Env, vals []any) ([]error, error) {
	return k.s.RedisWrite(ctx, env, unbox[V](vals))
}

func (k kind[K, V]) GetRedis(ctx context.Context, env *Env, keys []any) ([][]any, error) {
	got, err := k.s.RedisGet(ctx, env, unbox[K](keys))
	if err != nil {
		return nil, err
	}
	out := make([][]any, len(got))
	for i, copies := range got {
		out[i] = make([]any, len(copies))
		for j, c := range copies {
			if c != nil {
				out[i][j] = *c
			}
		}
	}
	return out, nil
}

func (k kind[K, V]) ScanRedis(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) (ScanPage[any], error) {
	p, err := k.s.RedisScan(ctx, env, cur, count)
	return ScanPage[any]{Values: box(p.Values), Scanned: p.Scanned, Invalid: p.Invalid, Next: p.Next}, err
}

// sortedUnique unboxes vals in key order, one merged value per key.
func (k kind[K, V]) sortedUnique(env *Env, vals []any) []V {
	in := unbox[V](vals)
	slices.SortStableFunc(in, k.s.Compare)
	out := in[:0]
	for _, v := range in {
		if n := len(out); n > 0 && k.s.Compare(out[n-1], v) == 0 {
			out[n-1] = k.s.Merge(env, out[n-1], v)
			continue
		}
		out = append(out, v)
	}
	return out
}

func box[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func unbox[T any](xs []any) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = x.(T)
	}
	return out
}
