package fullyread

import (
	"context"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Spec is a user's fully-read marker: a max-register per (user, channel,
// root) (Merge), one fully_read row and a field of the user's Redis hash,
// carried in a payload of its own (records.proto's FullyRead). It is the
// user's: an erasure deletes it.
var Spec = &kind.Spec[Ref, Marker]{
	Name:      "fully_read",
	Key:       func(m Marker) Ref { return m.Ref },
	Compare:   Compare,
	RecordKey: func(r Ref) string { return r.Key.KafkaKey() },
	User:      func(r Ref) string { return r.Key.User },
	Time:      func(m Marker) int64 { return m.UpdatedAtUnixMs },
	Zero:      func(r Ref) Marker { return Marker{Ref: r} },
	Empty:     func(m Marker) bool { return m.Seq == 0 },
	Merge:     func(_ *kind.Env, a, b Marker) Marker { m, _ := Merge(a, b); return m },
	Same:      func(a, b Marker) bool { return a == b },
	Payload:   payload,

	PGWrite: func(ctx context.Context, env *kind.Env, vals []Marker) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, refs []Ref) ([]Marker, error) {
		return storeOf(env).ReadPG(ctx, refs)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after Ref, _ bool, n int) ([]Marker, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},
	PGErase: eraseSQL,

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []Marker) ([]error, error) {
		res, err := storeOf(env).MergeRedis(ctx, vals)
		return kind.ResultErrs(res, err, func(r Result) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, refs []Ref) ([][]*Marker, error) {
		got, err := storeOf(env).ReadRedisRefs(ctx, refs)
		if err != nil {
			return nil, err
		}
		out := make([][]*Marker, len(refs))
		for i := range refs {
			out[i] = []*Marker{got[i]}
		}
		return out, nil
	},
	RedisScan: scanRedis,
	Scripts:   Scripts,
	// Left empty and complete, not deleted: a read that finds the hash
	// trusts it, so no Postgres row the erasure has not deleted yet shows.
	ErasedHashes: func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Postgres, env.Redis) }

// scanRedis is one SCAN page of the users' markers.
func scanRedis(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[Marker], error) {
	s := storeOf(env)
	users, next, err := s.ScanRedisUsers(ctx, cur, count)
	if err != nil {
		return kind.ScanPage[Marker]{}, err
	}
	page := kind.ScanPage[Marker]{Next: next}
	for _, u := range kind.ValidIDs("user_id", users, &page.Scanned, &page.Invalid) {
		ms, err := s.UserRedis(ctx, u)
		if err != nil {
			return page, err
		}
		page.Values = append(page.Values, ms...)
	}
	return page, nil
}
