package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/pgstore"
)

// Version is the build's version, set with
// -ldflags "-X github.com/readstate/receipts/cmd/internal/cli.Version=v1.2.3";
// without it, the VCS revision Go stamped into the binary, or "dev".
var Version = ""

// version returns Version or what the build info knows.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

// ErrVersionShown ends a run after --version printed the version.
var ErrVersionShown = errors.New("version shown")

// Main runs a command with a context that SIGINT and SIGTERM cancel, and
// exits 1 with the error on failure (0 after -h or --version).
func Main(name string, run func(ctx context.Context, args []string, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, ErrVersionShown) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Service is the command line every service binary shares:
//
//	NAME [flags]          run the service
//	NAME migrate [flags]  apply the Postgres migrations and exit
//
// Both forms take the Postgres and log flags (and --version); the service
// form also takes --admin-addr, --migrate and the service's own flags.
type Service struct {
	// Name is the binary's name; About is the paragraph --help prints.
	Name, About string
	// Postgres is the connection; its flags are registered by Parse.
	Postgres pgstore.Config
	// Admin is the admin port; Admin.Addr is its flag's default.
	Admin admin.Config
	// Log are the log flags.
	Log LogFlags
	// Migrate is --migrate: apply the migrations at start-up.
	Migrate bool
	// MigrateOnly is true for the migrate subcommand.
	MigrateOnly bool
}

// Parse parses args (the migrate word included) into s, and, unless it is
// the migrate subcommand, the service's own flags, which register adds. It
// returns flag.ErrHelp after -h and ErrVersionShown after --version.
func (s *Service) Parse(args []string, stderr io.Writer, register func(fs *flag.FlagSet)) error {
	s.MigrateOnly = len(args) > 0 && args[0] == "migrate"
	if s.MigrateOnly {
		args = args[1:]
	}
	fs := s.FlagSet(stderr, register)
	if err := Parse(fs, args); err != nil {
		return err
	}
	if fs.Lookup("version").Value.String() == "true" {
		fmt.Fprintln(stderr, s.Name, version())
		return ErrVersionShown
	}
	return nil
}

// FlagSet builds the flag set of the service's command line (of the migrate
// subcommand when MigrateOnly is set), its usage writing to out.
func (s *Service) FlagSet(out io.Writer, register func(fs *flag.FlagSet)) *flag.FlagSet {
	name := s.Name
	if s.MigrateOnly {
		name += " migrate"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Bool("version", false, "print the version and exit")
	s.Postgres.RegisterFlags(fs)
	s.Log.RegisterFlags(fs)
	if !s.MigrateOnly {
		s.Admin.RegisterFlags(fs)
		fs.BoolVar(&s.Migrate, "migrate", true, "apply the embedded migrations at start-up")
		if register != nil {
			register(fs)
		}
	}
	fs.Usage = func() {
		w := fs.Output()
		if s.MigrateOnly {
			fmt.Fprintf(w, "Usage: %s migrate [flags]\n\nApplies the embedded Postgres migrations (waiting for Postgres while it cannot be reached) and exits.\n\nFlags:\n", s.Name)
		} else {
			fmt.Fprintf(w, "Usage: %s [flags]\n       %s migrate [flags]\n\n%s\n\nFlags:\n", s.Name, s.Name, s.About)
		}
		PrintDefaults(fs)
	}
	return fs
}

// Logger builds the logger the log flags describe.
func (s *Service) Logger() (*zap.Logger, error) { return s.Log.New(s.Name) }

// RunMigrations applies the embedded migrations, waiting (and saying so)
// for as long as Postgres cannot be reached: a pod may start before its
// database. An error Postgres answers with (a missing database, a broken
// migration) ends it at once.
func RunMigrations(ctx context.Context, store *pgstore.Store, log *zap.Logger) error {
	var applied []string
	err := lifecycle.WhileUnavailable(ctx, func(ctx context.Context) error {
		var err error
		applied, err = store.Migrate(ctx)
		return err
	}, func(err error) bool { return pgstore.Classify(err) == errclass.Unavailable }, func(err error) {
		log.Warn("waiting for postgres to migrate", zap.Error(err))
	})
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	log.Info("migrations applied", zap.Strings("applied", applied))
	return nil
}

// Runner returns the lifecycle runner of the service, its admin port
// serving reg.
func (s *Service) Runner(log *zap.Logger, reg prometheus.Gatherer) *lifecycle.Runner {
	ac := s.Admin
	ac.Gatherer = reg
	ac.Logger = log
	return lifecycle.New(lifecycle.Config{Admin: ac, Logger: log})
}
