package cursors_test

import (
	"context"
	"crypto/tls"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/tlstest"
)

// openStore builds the store of cfg and loads its scripts.
func openStore(t *testing.T, cfg redisstore.ClientConfig) *redisstore.Store {
	t.Helper()
	rdb, err := cfg.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.New(rdb, cfg.StoreConfig())
	require.NoError(t, s.Load(context.Background()))
	return s
}

// masterOf is the address of the cluster master holding user's hash.
func masterOf(t *testing.T, s *redisstore.Store, user string) string {
	t.Helper()
	cc, ok := s.Client().(*redis.ClusterClient)
	require.True(t, ok, "a cluster client")
	node, err := cc.MasterForKey(context.Background(), cursors.NewStore(s).RedisKey(user))
	require.NoError(t, err)
	return node.Options().Addr
}

// walk scans every user with pages of about count keys, and returns the
// users and the masters the pages were on.
func walk(t *testing.T, s *redisstore.Store, count int64) (users, nodes []string, pages int) {
	t.Helper()
	var cur redisstore.ScanCursor
	for !cur.Done() {
		page, next, err := cursors.NewStore(s).ScanUsers(context.Background(), cur, count)
		require.NoError(t, err)
		if n := next.Scanned(); n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
		users = append(users, page...)
		cur = next
		pages++
		require.Less(t, pages, 10000, "the walk does not end")
	}
	slices.Sort(users)
	return slices.Compact(users), nodes, pages
}

// exerciseStore runs Merge, Get, Hydrate and the walk over 60 users and
// returns the users by master.
func exerciseStore(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := context.Background()
	var states []receipt.State
	var want []string
	for i := range 60 {
		u := "user" + strconv.Itoa(i)
		want = append(want, u)
		states = append(states, mark(u, "c1", 0, int64(10+i), "m", true), mark(u, "c2", 0, 3, "m3", false))
	}
	res, err := cursors.NewStore(s).Merge(ctx, states)
	require.NoError(t, err)
	for i, r := range res {
		require.NoError(t, r.Err, i)
		require.True(t, r.Advanced, i)
	}
	// A stale write loses, whichever node holds the key.
	res, err = cursors.NewStore(s).Merge(ctx, []receipt.State{mark("user7", "c1", 0, 1, "old", true)})
	require.NoError(t, err)
	require.False(t, res[0].Advanced)
	require.Equal(t, int64(17), res[0].State.Read.Position.Seq)

	got, complete, err := cursors.NewStore(s).Get(ctx, "user42", nil)
	require.NoError(t, err)
	require.False(t, complete)
	require.Len(t, got, 2)
	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "user42", []receipt.State{mark("user42", "c1", 0, 5, "m5", true), mark("user42", "c9", 0, 9, "m9", true)}, redisstore.Incarnation{}))
	got, complete, err = cursors.NewStore(s).Get(ctx, "user42", []string{"c1", "c9"})
	require.NoError(t, err)
	require.True(t, complete)
	require.Equal(t, int64(52), got[0].Read.Position.Seq, "hydrating never undoes a newer write")
	require.Equal(t, int64(9), got[1].Read.Position.Seq)

	// GetMany answers in one pipeline what Get answers user by user
	// (whichever node holds each user).
	var reqs []cursors.UserChannels
	for i := range 60 {
		r := cursors.UserChannels{User: "user" + strconv.Itoa(i)}
		if i%2 == 1 {
			r.Channels = []string{"c2", "none", "c1"}
		}
		reqs = append(reqs, r)
	}
	reqs = append(reqs, cursors.UserChannels{User: "user42", Channels: []string{"c9"}}, cursors.UserChannels{User: "nobody"})
	many, err := cursors.NewStore(s).GetMany(ctx, reqs)
	require.NoError(t, err)
	require.Len(t, many, len(reqs))
	for i, r := range reqs {
		one, complete, err := cursors.NewStore(s).Get(ctx, r.User, r.Channels)
		require.NoError(t, err)
		slices.SortFunc(one, receipt.CompareStates)
		slices.SortFunc(many[i].States, receipt.CompareStates)
		require.Equal(t, one, many[i].States, "%+v", r)
		require.Equal(t, complete, many[i].Complete, "%+v", r)
	}
	require.Len(t, many[1].States, 2, "c2 and c1 of user1; no state for none")
	require.True(t, many[60].Complete)
	require.Empty(t, many[61].States)

	users, _, pages := walk(t, s, 7)
	slices.Sort(want)
	require.Equal(t, want, users)
	require.Greater(t, pages, 3, "bounded pages, not one sweep of everything")
}

// A 3-master Redis Cluster: the store works through the cluster client
// (Lua merges routed by the {user} hash tag, scripts loaded on every
// master) and the walk visits every master, in bounded pages.
func TestClusterModeWalksEveryMaster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	// One seed is enough: the client learns the other masters.
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "receipts:"}
	require.NoError(t, cfg.Validate())
	s := openStore(t, cfg)
	exerciseStore(t, s)

	byMaster := map[string]int{}
	for i := range 60 {
		byMaster[masterOf(t, s, "user"+strconv.Itoa(i))]++
	}
	require.Len(t, byMaster, 3, "the users are spread over the three masters: %v", byMaster)
	_, nodes, _ := walk(t, s, 1000)
	slices.Sort(nodes)
	want := slices.Clone(c.Addrs)
	slices.Sort(want)
	require.Equal(t, want, nodes, "the walk scanned every master")

	// An empty cluster walk ends, with no user.
	empty := redisstore.New(s.Client(), redisstore.Config{Prefix: "nothing-here:"})
	users, _, _ := walk(t, empty, 10)
	require.Empty(t, users)
}

// Redis over TLS: rediss:// (or --redis-tls) with the CA that signed the
// server's certificate works; the system roots, or plaintext, do not.
func TestTLS(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	port := redistest.FreePort(t)
	redistest.StartServer(t, port, &redis.Options{TLSConfig: &tls.Config{RootCAs: pki.CAPool, MinVersion: tls.VersionTLS12}},
		"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", pki.ServerCertFile, "--tls-key-file", pki.ServerKeyFile,
		"--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "no")
	addr := "127.0.0.1:" + strconv.Itoa(port)

	s := openStore(t, redisstore.ClientConfig{URL: "rediss://" + addr + "/0", TLSCAFile: pki.CAFile, Prefix: "receipts:"})
	exerciseStore(t, s)
	s = openStore(t, redisstore.ClientConfig{URL: "redis://" + addr + "/0", TLS: true, TLSCAFile: pki.CAFile, Prefix: "receipts:"})
	require.NoError(t, s.Ping(context.Background()))

	for _, cfg := range []redisstore.ClientConfig{
		{URL: "rediss://" + addr + "/0"}, // system roots: not our CA
		{URL: "redis://" + addr + "/0"},  // plaintext to a TLS port
	} {
		rdb, err := cfg.NewClient()
		require.NoError(t, err)
		s := redisstore.New(rdb, cfg.StoreConfig())
		err = s.Ping(context.Background())
		require.ErrorIs(t, err, redisstore.ErrUnavailable, cfg.URL)
		_ = rdb.Close()
	}
}

// A Redis Cluster whose nodes speak only TLS (client and bus): the client
// verifies each node against the host it dials, with --redis-tls and the
// CA file.
func TestClusterOverTLS(t *testing.T) {
	t.Parallel()
	redistest.NeedBinaries(t, "redis-server", "redis-cli")
	pki := tlstest.New(t)
	tlsArgs := []string{"--tls-cert-file", pki.ServerCertFile, "--tls-key-file", pki.ServerKeyFile,
		"--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "no", "--tls-cluster", "yes", "--tls-replication", "yes"}
	c := redistest.StartTLSCluster(t, 3, pki.CAFile, tlsArgs)
	s := openStore(t, redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs, TLS: true, TLSCAFile: pki.CAFile, Prefix: "receipts:"})
	exerciseStore(t, s)
	_, nodes, _ := walk(t, s, 1000)
	require.Len(t, nodes, 3)
}

// Sentinel mode: the client asks the sentinel for the master and writes
// there, in the URL's database.
func TestSentinelMode(t *testing.T) {
	t.Parallel()
	redistest.NeedBinaries(t, "redis-server")
	master := redistest.StartServer(t, redistest.FreePort(t), nil)
	sentinel := redistest.StartSentinel(t, redistest.FreePort(t), "mymaster", master.Addr)

	cfg := redisstore.ClientConfig{Mode: redisstore.ModeSentinel, Addrs: []string{sentinel.Addr},
		SentinelMaster: "mymaster", URL: "redis://ignored:1/3", Prefix: "receipts:"}
	require.NoError(t, cfg.Validate())
	s := openStore(t, cfg)
	exerciseStore(t, s)

	direct := redis.NewClient(&redis.Options{Addr: master.Addr, DB: 3})
	defer direct.Close()
	n, err := direct.Exists(context.Background(), cursors.NewStore(s).RedisKey("user1")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "written to the master the sentinel names, database 3")
}

func TestClientConfigNamesBadCombinations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  redisstore.ClientConfig
		want []string
	}{
		{redisstore.ClientConfig{}, nil},
		{redisstore.ClientConfig{Mode: "cluster"}, nil},
		{redisstore.ClientConfig{Mode: "cluster", Addrs: []string{"a:1", "b:2"}, URL: "rediss://:pw@x:1"}, nil},
		{redisstore.ClientConfig{Mode: "sentinel", Addrs: []string{"s:26379"}, SentinelMaster: "m"}, nil},
		{redisstore.ClientConfig{Mode: "ring"}, []string{`--redis-mode "ring": want one of single, cluster, sentinel`}},
		{redisstore.ClientConfig{Mode: "sentinel"}, []string{"needs --redis-addrs", "needs --redis-sentinel-master"}},
		{redisstore.ClientConfig{Addrs: []string{"a:1"}}, []string{"--redis-addrs is for cluster and sentinel modes"}},
		{redisstore.ClientConfig{Mode: "cluster", SentinelMaster: "m"}, []string{"--redis-sentinel-master is for sentinel mode"}},
		{redisstore.ClientConfig{Mode: "cluster", URL: "redis://x:1/2"}, []string{"Redis Cluster has only database 0"}},
		{redisstore.ClientConfig{TLSCAFile: "/etc/ssl/x.pem"}, []string{"--redis-tls-ca-file set without TLS"}},
		{redisstore.ClientConfig{TLS: true, TLSCAFile: "/nonexistent.pem"}, []string{"reading --redis-tls-ca-file"}},
		{redisstore.ClientConfig{URL: "http://x"}, []string{"--redis-url"}},
	} {
		err := tc.cfg.Validate()
		if tc.want == nil {
			require.NoError(t, err, "%+v", tc.cfg)
			continue
		}
		require.ErrorIs(t, err, redisstore.ErrConfig)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w)
		}
		_, err = tc.cfg.NewClient()
		require.ErrorIs(t, err, redisstore.ErrConfig)
	}
}
