package members

import (
	"context"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// spec is a user's membership register in a channel: the greater
// (version, member, join) wins (channel.MergeMembership), one
// channel_members row, and in Redis two copies: a field of the user's
// membership hash and one of the channel's.
var spec = &kind.Spec[receipt.Key, channel.Membership]{
	Name: "channel_members",
	Key:  func(m channel.Membership) receipt.Key { return m.Key },
	// (channel, user): the order of the table's primary key.
	Compare:   Compare,
	RecordKey: receipt.Key.KafkaKey,
	User:      func(k receipt.Key) string { return k.User },
	Time:      func(m channel.Membership) int64 { return m.VersionUnixMs },
	Zero:      func(k receipt.Key) channel.Membership { return channel.Membership{Key: k} },
	Empty:     channel.Membership.IsZero,
	Merge: func(_ *kind.Env, a, b channel.Membership) channel.Membership {
		m, _ := channel.MergeMembership(a, b)
		return m
	},
	Same: func(a, b channel.Membership) bool { return a.Compare(b) == 0 },
	FromEvent: func(d *event.Decoded) (channel.Membership, bool) {
		if d.Membership == nil {
			return channel.Membership{}, false
		}
		return *d.Membership, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []channel.Membership) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([]channel.Membership, error) {
		users, chs := kind.ByUser(keys)
		var out []channel.Membership
		for _, u := range users {
			for start := 0; start < len(chs[u]); start += kind.PGGetChunk {
				rows, err := storeOf(env).ReadPG(ctx, u, chs[u][start:min(start+kind.PGGetChunk, len(chs[u]))])
				if err != nil {
					return nil, err
				}
				out = append(out, rows...)
			}
		}
		return out, nil
	},
	PGPage: func(ctx context.Context, env *kind.Env, after receipt.Key, _ bool, n int) ([]channel.Membership, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []channel.Membership) ([]error, error) {
		res, err := storeOf(env).MergeMemberships(ctx, vals)
		return kind.ResultErrs(res, err, func(r MembershipResult) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([][]*channel.Membership, error) {
		byUser, byChannel, err := storeOf(env).RegistersOf(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.Membership, len(keys))
		for i := range keys {
			out[i] = []*channel.Membership{byUser[i], byChannel[i]}
		}
		return out, nil
	},
	// The walk scans the users' hashes; the channels' copies are compared
	// by the Postgres walk (a register only Redis holds is copied into
	// both by the repair's merge).
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[channel.Membership], error) {
		users, next, err := storeOf(env).ScanMembershipUsers(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[channel.Membership]{}, err
		}
		page := kind.ScanPage[channel.Membership]{Next: next}
		for _, u := range kind.ValidIDs("user_id", users, &page.Scanned, &page.Invalid) {
			regs, _, err := storeOf(env).Memberships(ctx, u, nil)
			if err != nil {
				return page, err
			}
			for _, m := range regs {
				if m.Validate() != nil {
					page.Invalid++
					continue
				}
				page.Values = append(page.Values, m)
			}
		}
		return page, nil
	},
	Scripts: Scripts,
	// An erasure leaves the user's hash empty and complete, counting no
	// left register, and cleans the channels its fields name (each a
	// channel id); in each of them it removes the user's register from
	// the channel's hash (keeping the member count), before the views
	// clean the channel.
	ErasedHashes:       func(env *kind.Env, user string) []string { return []string{storeOf(env).UserMembersKey(user)} },
	PGErase:            eraseSQL,
	PGChannels:         channelsSQL,
	ErasedNameChannels: true,
	ErasedCounters:     []string{LeftCountField},
	RedisRedact: func(ctx context.Context, env *kind.Env, user, ch string) error {
		return storeOf(env).EraseChannel(ctx, user, ch)
	},
}

// Kind is the membership registers' kind, listed by the registry
// pkg/kinds.
var Kind = kind.New(spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Postgres, env.Redis) }
