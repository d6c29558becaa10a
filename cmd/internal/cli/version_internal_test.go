package cli

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBuildInfoFallback: the -X version (and revision) wins; without it a `go install
// …@v1.2.3` build prints its module version, a (devel) build in a
// checkout "dev-" and its revision, and a build with neither "dev". The
// revision and the modified flag come from the VCS stamp whatever the
// version's source.
func TestBuildInfoFallback(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	stamped := func(main string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/readstate/receipts", Version: main}, Settings: settings}
	}
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name, ldVersion, ldRevision string
		bi                          *debug.BuildInfo
		want                        BuildInfo
	}{
		{"ldflags win", "v9.9.9", "", stamped("v1.2.3", vcs...), BuildInfo{Version: "v9.9.9", Revision: rev, Modified: true, GoVersion: "go1.99.1"}},
		{"a revision from ldflags wins too", "v9.9.9", "fedcba9876543210", stamped("v1.2.3", vcs...),
			BuildInfo{Version: "v9.9.9", Revision: "fedcba9876543210", GoVersion: "go1.99.1"}},
		{"go install from the proxy", "", "", stamped("v1.2.3"), BuildInfo{Version: "v1.2.3", GoVersion: "go1.99.1"}},
		{"go build in a checkout", "", "", stamped("v0.0.0-20261202070244-0123456789ab+dirty", vcs...),
			BuildInfo{Version: "v0.0.0-20261202070244-0123456789ab+dirty", Revision: rev, Modified: true, GoVersion: "go1.99.1"}},
		{"devel with a revision", "", "", stamped("(devel)", vcs[0], vcs[1], debug.BuildSetting{Key: "vcs.modified", Value: "false"}),
			BuildInfo{Version: "dev-0123456789ab", Revision: rev, GoVersion: "go1.99.1"}},
		{"devel without vcs", "", "", stamped("(devel)"), BuildInfo{Version: "dev", GoVersion: "go1.99.1"}},
		{"no build info", "", "", nil, BuildInfo{Version: "dev", GoVersion: runtime.Version()}},
	} {
		require.Equal(t, tc.want, buildInfo(tc.ldVersion, tc.ldRevision, tc.bi), tc.name)
	}

	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	require.Equal(t, "v1.2.3 go1.99.1"+platform, BuildInfo{Version: "v1.2.3", GoVersion: "go1.99.1"}.String())
	require.Equal(t, "v1.2.3 (revision "+rev+", modified) go1.99.1"+platform,
		BuildInfo{Version: "v1.2.3", Revision: rev, Modified: true, GoVersion: "go1.99.1"}.String())
	require.Equal(t, "dev-0123456789ab (revision "+rev+") go1.99.1"+platform,
		BuildInfo{Version: "dev-0123456789ab", Revision: rev, GoVersion: "go1.99.1"}.String())
}
