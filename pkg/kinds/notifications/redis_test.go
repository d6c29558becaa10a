package notifications

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), and that driver.
func newRedisStore(t *testing.T) (Store, *redisstore.Store) {
	t.Helper()
	rs := kindtest.Redis(t, Scripts...)
	return NewStore(nil, rs), rs
}

// A notification change is versioned by Redis as a membership change is:
// Redis' clock, or one above a register stored from a clock ahead; the
// badge's read sees it with the user's default level, complete only once
// hydrated; an erasure empties the hash and leaves it complete.
func TestNotificationsVersionedByRedisAndHydrated(t *testing.T) {
	t.Parallel()
	s, rs := newRedisStore(t)
	ctx := context.Background()
	k := receipt.Key{User: "u", Channel: "c"}
	before := time.Now().Add(-time.Minute).UnixMilli()
	ahead := time.Now().Add(10 * time.Minute).UnixMilli()

	res := s.Change(ctx, notification.Register{Key: k, Level: notification.Mentions, MutedUntilUnixMs: 7, VersionUnixMs: ahead})
	require.NoError(t, res.Err)
	require.True(t, res.Changed)
	require.Equal(t, redisstore.GenerationUnknown, res.Generation, "no tombstone in Redis")
	require.Greater(t, res.Register.VersionUnixMs, before)
	require.Less(t, res.Register.VersionUnixMs, ahead, "Redis' clock, not the proposed one")

	merged, err := s.MergeRedis(ctx, []notification.Register{{Key: k, Level: notification.All, VersionUnixMs: ahead}})
	require.NoError(t, err)
	require.True(t, merged[0].Changed)
	res = s.Change(ctx, notification.Register{Key: k, Level: notification.None})
	require.NoError(t, res.Err)
	require.Equal(t, notification.Register{Key: k, Level: notification.None, VersionUnixMs: ahead + 1}, res.Register, "above the register it read")

	_, err = settings.NewStore(nil, rs).MergeRedis(ctx, []privacy.Settings{{User: "u", ShareRead: true, VersionMs: 5, DefaultLevel: notification.Mentions}})
	require.NoError(t, err)
	lv, err := s.LevelsOf(ctx, "u", []string{"c", "other"})
	require.NoError(t, err)
	require.True(t, lv.SettingsFound)
	require.Equal(t, notification.Mentions, lv.Settings.DefaultLevel)
	require.Equal(t, map[string]notification.Register{"c": res.Register}, lv.Registers)
	require.False(t, lv.Complete, "never hydrated: an absent register is unknown")

	other := notification.Register{Key: receipt.Key{User: "u", Channel: "other"}, Level: notification.All, VersionUnixMs: 1}
	stale := notification.Register{Key: k, Level: notification.All, VersionUnixMs: 2}
	require.NoError(t, s.Hydrate(ctx, "u", []notification.Register{stale, other}))
	lv, err = s.LevelsOf(ctx, "u", []string{"c", "other"})
	require.NoError(t, err)
	require.True(t, lv.Complete)
	require.Equal(t, map[string]notification.Register{"c": res.Register, "other": other}, lv.Registers, "a hydrate never undoes a newer change")
	// Riding another read's pipeline (the unread view's) brings the same
	// answer.
	read := s.NewLevelsRead()
	err = ride(ctx, rs, read, "u", []string{"c", "other"})
	require.NoError(t, err)
	require.NotNil(t, read.Levels(), "read with the counts")
	require.Equal(t, lv, *read.Levels())

	ttl, err := rs.Client().PTTL(ctx, s.RedisKey("u")).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "a hash holding registers never expires")

	// A user who set nothing: the hydrated hash only caches that, and expires.
	require.NoError(t, s.Hydrate(ctx, "quiet", nil))
	ttl, err = rs.Client().PTTL(ctx, s.RedisKey("quiet")).Result()
	require.NoError(t, err)
	require.Positive(t, ttl)
	res = s.Change(ctx, notification.Register{Key: receipt.Key{User: "quiet", Channel: "c"}, Level: notification.None})
	require.NoError(t, res.Err)
	ttl, err = rs.Client().PTTL(ctx, s.RedisKey("quiet")).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "its first register makes it permanent")

	_, err = rs.Erase(ctx, "u", time.Now().UnixMilli(), 0, kind.ErasedHashes([]kind.Kind{Kind}, &kind.Env{Redis: rs}, "u"), nil)
	require.NoError(t, err)
	regs, complete, err := s.ReadRedis(ctx, "u", nil)
	require.NoError(t, err)
	require.Empty(t, regs)
	require.True(t, complete, "erased: empty and complete, so reads never go back to Postgres rows not yet deleted")
}

// ride runs read on a pipeline of its own, as the unread view's read
// queues it with its heads.
func ride(ctx context.Context, rs *redisstore.Store, read *LevelsRead, user string, channels []string) error {
	_, err := rs.Exec(ctx, func(pipe redis.Pipeliner) { read.Queue(ctx, pipe, user, channels) }, Scripts...)
	return err
}

// Over many channels the unread read takes the user's notification hash
// whole: the same levels as LevelsOf's field read, and none (so the caller
// reads LevelsOf) for a hash over the bound.
func TestLevelsOfManyChannelsReadTheHashWhole(t *testing.T) {
	t.Parallel()
	s, rs := newRedisStore(t)
	ctx := context.Background()
	var channels []string
	for i := range levelsWholeFrom + 10 {
		channels = append(channels, fmt.Sprintf("c%04d", i))
	}
	var regs []notification.Register
	for _, ch := range channels[:3] {
		regs = append(regs, notification.Register{Key: receipt.Key{User: "u", Channel: ch}, Level: notification.None, VersionUnixMs: 9})
	}
	require.NoError(t, s.Hydrate(ctx, "u", regs))
	want, err := s.LevelsOf(ctx, "u", channels)
	require.NoError(t, err)
	require.Len(t, want.Registers, 3)
	read := s.NewLevelsRead()
	require.NoError(t, ride(ctx, rs, read, "u", channels))
	require.NotNil(t, read.Levels())
	require.Equal(t, want, *read.Levels(), "the hash read whole")
	require.True(t, read.Levels().Complete)

	// A hash over the bound: no levels from the unread read.
	fields := make([]any, 0, 2*redisstore.WholeHashCount)
	for i := range redisstore.WholeHashCount {
		fields = append(fields, fmt.Sprintf("x%05d", i), "junk")
	}
	require.NoError(t, rs.Client().HSet(ctx, s.RedisKey("u"), fields...).Err())
	read = s.NewLevelsRead()
	require.NoError(t, ride(ctx, rs, read, "u", channels))
	require.Nil(t, read.Levels(), "too many registers: read LevelsOf")
}
