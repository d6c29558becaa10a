package settings

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/redisstore"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), and that driver.
func newRedisStore(t *testing.T) (Store, *redisstore.Store) {
	t.Helper()
	rs := kindtest.Redis(t, Scripts...)
	return NewStore(nil, rs), rs
}

// Redis holds no settings of a user who set none (the defaults, not
// found); a merge keeps the newer version, and on a tie the one hiding
// read, as privacy.Merge; the defaults cached (version 0) expire, a real
// setting never does.
func TestRedisMergesAsPrivacyMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rs := newRedisStore(t)
	sts, found, err := s.ReadRedis(ctx, []string{"u"})
	require.NoError(t, err)
	require.False(t, found[0])
	require.Equal(t, privacy.Default("u"), sts[0])
	newer := privacy.Settings{User: "u", ShareRead: false, ShareDelivered: true, VersionMs: 10}
	older := privacy.Settings{User: "u", ShareRead: true, ShareDelivered: true, VersionMs: 5}
	tie := privacy.Settings{User: "u", ShareRead: true, ShareDelivered: false, VersionMs: 10}
	got, err := s.MergeRedis(ctx, []privacy.Settings{newer, older, tie})
	require.NoError(t, err)
	require.Equal(t, []privacy.Settings{newer, newer, newer}, got, "older loses; on a tie the one hiding read wins, as privacy.Merge")
	want, _ := privacy.Merge(tie, newer)
	require.Equal(t, want, got[2])
	ttl, err := rs.Client().PTTL(ctx, s.RedisKey("u")).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "a real setting never expires")

	_, err = s.MergeRedis(ctx, []privacy.Settings{privacy.Default("quiet")})
	require.NoError(t, err)
	ttl, err = rs.Client().PTTL(ctx, s.RedisKey("quiet")).Result()
	require.NoError(t, err)
	require.Positive(t, ttl, "the cached defaults expire")
	sts, found, err = s.ReadRedis(ctx, []string{"quiet", "u"})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, found)
	require.Equal(t, []privacy.Settings{privacy.Default("quiet"), newer}, sts)
}

// A settings change is versioned by Redis, as a membership change is,
// and reads the user's erasure generation where it writes; a probe on
// another read's pipeline reads what ReadRedis reads.
func TestChangeTakesItsVersionFromRedis(t *testing.T) {
	t.Parallel()
	s, rs := newRedisStore(t)
	ctx := context.Background()
	ahead := time.Now().Add(10 * time.Minute).UnixMilli()

	st, gen, err := s.Change(ctx, privacy.Settings{User: "u", ShareRead: false, ShareDelivered: true, VersionMs: ahead})
	require.NoError(t, err)
	require.Equal(t, redisstore.GenerationUnknown, gen)
	require.Less(t, st.VersionMs, ahead, "Redis' clock, not the proposed one")
	require.Greater(t, st.VersionMs, time.Now().Add(-time.Minute).UnixMilli())

	_, err = s.MergeRedis(ctx, []privacy.Settings{{User: "u", ShareRead: true, ShareDelivered: true, VersionMs: ahead}})
	require.NoError(t, err)
	_, err = rs.Erase(ctx, "u", 5_000, 0, kind.ErasedHashes([]kind.Kind{Kind}, &kind.Env{Redis: rs}, "u"), nil)
	require.NoError(t, err)
	_, err = s.MergeRedis(ctx, []privacy.Settings{{User: "u", ShareRead: true, ShareDelivered: true, VersionMs: ahead}})
	require.NoError(t, err)
	st, gen, err = s.Change(ctx, privacy.Settings{User: "u", ShareRead: false, ShareDelivered: false, DefaultLevel: notification.None})
	require.NoError(t, err)
	want := privacy.Settings{User: "u", DefaultLevel: notification.None, VersionMs: ahead + 1}
	require.Equal(t, want, st, "one above a stored version ahead of Redis' clock")
	require.Equal(t, int64(5_000), gen, "the erasure's generation")

	var probe Probe
	_, err = rs.Exec(ctx, func(pipe redis.Pipeliner) { probe = s.Queue(ctx, pipe, "u") })
	require.NoError(t, err)
	got, found, err := probe.Result()
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, want, got)
}

// An erasure deletes the user's settings hash (the Spec's DeletedHashes,
// run by the driver's erasure), leaving no marker: a read finds none and
// reads Postgres, whose row the erasure deletes too. Another user's stay.
func TestErasureDeletesTheHash(t *testing.T) {
	t.Parallel()
	s, rs := newRedisStore(t)
	ctx := context.Background()
	_, err := s.MergeRedis(ctx, []privacy.Settings{{User: "gone", ShareDelivered: true, VersionMs: 1}, {User: "kept", ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	_, err = rs.Erase(ctx, "gone", 1_000, 0, kind.ErasedHashes([]kind.Kind{Kind}, &kind.Env{Redis: rs}, "gone"), nil)
	require.NoError(t, err)
	n, err := rs.Client().Exists(ctx, s.RedisKey("gone")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the erased user's hash is gone")
	_, found, err := s.ReadRedis(ctx, []string{"gone", "kept"})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, found)
}
