package cli

import (
	"flag"
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger returns a logger named after the binary. format is "json" or
// "console"; level is debug, info, warn or error.
func NewLogger(name, format, level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("parsing log level: %w", err)
	}
	var cfg zap.Config
	switch format {
	case "json", "":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("unknown log format %q (json or console)", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	l, err := cfg.Build()
	if err != nil {
		return nil, err
	}
	return l.Named(name), nil
}

// LogFlags are the --log-format and --log-level flags every binary has.
type LogFlags struct {
	Format string
	Level  string
}

// RegisterFlags adds the flags to fs with their defaults (console, info).
func (f *LogFlags) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Format, "log-format", "console", "log format: console or json")
	fs.StringVar(&f.Level, "log-level", "info", "log level: debug, info, warn or error")
}

// New builds the logger the flags describe.
func (f LogFlags) New(name string) (*zap.Logger, error) { return NewLogger(name, f.Format, f.Level) }
