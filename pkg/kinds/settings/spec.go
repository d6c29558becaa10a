package settings

import (
	"context"
	"strings"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Spec is a user's privacy settings: a versioned register, the newer
// version wins and a tie shares less (privacy.Merge), one user_settings
// row and a Redis hash. A user without either holds the defaults; a
// Redis entry of version 0 caches them. A register merged into Redis is
// applied to the user's channel views, so a kind the user stopped
// sharing leaves them.
var Spec = &kind.Spec[string, privacy.Settings]{
	Name:      "user_settings",
	Key:       func(st privacy.Settings) string { return st.User },
	Compare:   func(a, b privacy.Settings) int { return strings.Compare(a.User, b.User) },
	RecordKey: event.UserKey,
	User:      func(u string) string { return u },
	Time:      func(st privacy.Settings) int64 { return st.VersionMs },
	Zero:      privacy.Default,
	Empty:     func(st privacy.Settings) bool { return st.VersionMs == 0 },
	Merge:     func(_ *kind.Env, a, b privacy.Settings) privacy.Settings { m, _ := privacy.Merge(a, b); return m },
	Same:      func(a, b privacy.Settings) bool { return a == b },
	FromEvent: func(d *event.Decoded) (privacy.Settings, bool) {
		if d.Settings == nil {
			return privacy.Settings{}, false
		}
		return *d.Settings, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []privacy.Settings) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, users []string) ([]privacy.Settings, error) {
		got, err := storeOf(env).StoredPG(ctx, users)
		if err != nil {
			return nil, err
		}
		out := make([]privacy.Settings, 0, len(got))
		for _, u := range users {
			if st, ok := got[u]; ok {
				out = append(out, st)
			}
		}
		return out, nil
	},
	PGPage: func(ctx context.Context, env *kind.Env, after string, _ bool, n int) ([]privacy.Settings, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},
	PGErase: eraseSQL,

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []privacy.Settings) ([]error, error) {
		stored, err := storeOf(env).MergeRedis(ctx, vals)
		if err != nil {
			return nil, err
		}
		errs := make([]error, len(stored))
		if env.SettingsApplied == nil {
			return errs, nil
		}
		for i, st := range stored {
			errs[i] = env.SettingsApplied(ctx, st)
		}
		return errs, nil
	},
	RedisGet: func(ctx context.Context, env *kind.Env, users []string) ([][]*privacy.Settings, error) {
		sts, found, err := storeOf(env).ReadRedis(ctx, users)
		if err != nil {
			return nil, err
		}
		out := make([][]*privacy.Settings, len(users))
		for i := range users {
			out[i] = []*privacy.Settings{nil}
			if found[i] {
				out[i][0] = &sts[i]
			}
		}
		return out, nil
	},
	RedisScan: scanRedis,
	Scripts:   Scripts,
	// Deleted, not left complete: a read that finds no settings reads
	// Postgres, whose row the same erasure deletes, and the gateway
	// writes back no row the tombstone predates.
	DeletedHashes: func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Postgres, env.Redis) }

// scanRedis is one SCAN page of the users' settings.
func scanRedis(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[privacy.Settings], error) {
	s := storeOf(env)
	users, next, err := s.ScanRedisUsers(ctx, cur, count)
	if err != nil {
		return kind.ScanPage[privacy.Settings]{}, err
	}
	page := kind.ScanPage[privacy.Settings]{Next: next}
	valid := kind.ValidIDs("user_id", users, &page.Scanned, &page.Invalid)
	sts, found, err := s.ReadRedis(ctx, valid)
	if err != nil {
		return page, err
	}
	for i := range valid {
		if found[i] {
			page.Values = append(page.Values, sts[i])
		}
	}
	return page, nil
}
