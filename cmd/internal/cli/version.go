package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/readstate/receipts/pkg/admin"
)

// Version is the build's version, set with
// -ldflags "-X github.com/readstate/receipts/cmd/internal/cli.Version=v1.2.3"
// (the release build and the image do). Without it, Build falls back on
// what Go stamped into the binary: the module version of a `go install
// …@v1.2.3`, or the VCS revision of a build in a checkout.
var Version = ""

// Revision is the VCS revision the build came from, set with -X like
// Version (the release build does: its builds may run without VCS
// stamping); without it, the vcs.revision Go stamped, if any.
var Revision = ""

// ErrVersionShown ends a run after --version printed the version.
var ErrVersionShown = errors.New("version shown")

// BuildInfo is what a binary knows of its own build.
type BuildInfo struct {
	// Version is Version when set; else the main module's version when Go
	// stamped one (not "(devel)"); else "dev-" and the first 12 digits of
	// the revision; else "dev".
	Version string
	// Revision is the VCS revision the binary was built from ("" when
	// unknown: a `go install` from the module proxy has none), and
	// Modified whether the work tree had uncommitted changes.
	Revision string
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Build returns the running binary's BuildInfo.
func Build() BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return buildInfo(Version, Revision, bi)
}

// buildInfo resolves a BuildInfo from the -X version and revision and the
// build info (nil when the binary has none).
func buildInfo(version, revision string, bi *debug.BuildInfo) BuildInfo {
	b := BuildInfo{Version: version, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
	}
	if revision != "" {
		b.Revision, b.Modified = revision, false
	}
	if b.Version == "" {
		b.Version = "dev"
		if len(b.Revision) >= 12 {
			b.Version += "-" + b.Revision[:12]
		}
	}
	return b
}

// String is the line --version prints after the binary's name:
// "v1.2.3 (revision 0123456789ab…, modified) go1.26.8 linux/amd64",
// the parenthesis only when the revision is known.
func (b BuildInfo) String() string {
	s := b.Version
	if b.Revision != "" {
		s += " (revision " + b.Revision
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + b.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// Admin is the build as the admin registry's receipts_build_info labels
// it.
func (b BuildInfo) Admin() admin.Build {
	return admin.Build{Version: b.Version, Revision: b.Revision, GoVersion: b.GoVersion}
}

// PrintVersion writes "NAME BUILD" and a newline to w.
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintln(w, name, Build())
}

// RegisterVersionFlag adds --version to fs.
func RegisterVersionFlag(fs *flag.FlagSet) {
	fs.Bool("version", false, "print the version and exit")
}

// VersionRequested prints the version to w and returns ErrVersionShown
// when the parsed fs had --version (nil otherwise).
func VersionRequested(fs *flag.FlagSet, name string, w io.Writer) error {
	if f := fs.Lookup("version"); f == nil || f.Value.String() != "true" {
		return nil
	}
	PrintVersion(w, name)
	return ErrVersionShown
}

// IsVersionArg reports whether args is a request for the version alone
// (--version, -version or version), as the commands with subcommands
// (receiptsctl, receiptsbench) take it.
func IsVersionArg(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version")
}
