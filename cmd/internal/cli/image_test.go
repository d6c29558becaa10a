package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoFile reads a file at the repository root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", name))
	require.NoError(t, err)
	return string(b)
}

// dockerInstructions are the Dockerfile's instructions, continuation
// lines joined and comments dropped.
func dockerInstructions(t *testing.T) []string {
	t.Helper()
	var out []string
	cur := ""
	for line := range strings.SplitSeq(repoFile(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += more + " "
			continue
		}
		out = append(out, cur+trimmed)
		cur = ""
	}
	return out
}

var (
	ldflagsRe = regexp.MustCompile(`-ldflags "([^"]*)"`)
	argRe     = regexp.MustCompile(`\$\{([A-Z_]+)\}`)
)

// imageLdflags are the -ldflags of the Dockerfile's go build, its build
// args replaced by args; every arg they use must be declared (ARG) in the
// build stage before the build.
func imageLdflags(t *testing.T, args map[string]string) string {
	t.Helper()
	declared := map[string]bool{}
	for _, ins := range dockerInstructions(t) {
		if strings.HasPrefix(ins, "FROM ") {
			clear(declared)
			continue
		}
		if name, ok := strings.CutPrefix(ins, "ARG "); ok {
			name, _, _ = strings.Cut(name, "=")
			declared[name] = true
			continue
		}
		if !strings.HasPrefix(ins, "RUN ") || !strings.Contains(ins, "go build") {
			continue
		}
		m := ldflagsRe.FindStringSubmatch(ins)
		require.NotNil(t, m, "the Dockerfile's go build has no -ldflags: %s", ins)
		return argRe.ReplaceAllStringFunc(m[1], func(ref string) string {
			name := argRe.FindStringSubmatch(ref)[1]
			require.True(t, declared[name], "the Dockerfile's go build uses ${%s}, no ARG of its stage", name)
			v, ok := args[name]
			require.True(t, ok, "the Dockerfile's go build uses ${%s}: give the test a value", name)
			return v
		})
	}
	t.Fatal("the Dockerfile has no RUN … go build")
	return ""
}

// TestImageStampsVersionAndRevision: the image's build stamps the
// VERSION and REVISION build args into cli.Version and cli.Revision (what
// TestEveryBinaryPrintsItsVersion then builds with), and the image target
// of the Makefile passes both, the commit as REVISION, to docker build and
// to its local stand-in; the release build stamps both too.
func TestImageStampsVersionAndRevision(t *testing.T) {
	t.Parallel()
	const cli = "-X github.com/readstate/receipts/cmd/internal/cli."
	flags := imageLdflags(t, map[string]string{"VERSION": "v1", "REVISION": "abc"})
	require.Contains(t, flags, cli+"Version=v1")
	require.Contains(t, flags, cli+"Revision=abc")
	label := false
	for _, ins := range dockerInstructions(t) {
		label = label || strings.HasPrefix(ins, "LABEL ") && strings.Contains(ins, `org.opencontainers.image.revision="${REVISION}"`)
	}
	require.True(t, label, "the image is labelled with its revision")

	mk := repoFile(t, "Makefile")
	require.Regexp(t, `(?m)^REVISION \?= \$\(shell git rev-parse HEAD`, mk)
	require.Contains(t, mk, "--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION)")
	require.Regexp(t, `docker build -t \$\(IMAGE\):\$\(VERSION\) \$\(IMAGE_BUILD_ARGS\) \.`, mk)
	require.Contains(t, mk, cli+"Revision=$(REVISION)", "make image's local check builds as the image does")

	rel := repoFile(t, ".goreleaser.yaml")
	require.Contains(t, rel, cli+"Version=")
	require.Contains(t, rel, cli+"Revision={{ .FullCommit }}")
}
