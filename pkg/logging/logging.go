// Package logging builds the zap logger every binary uses: JSON for
// machines or console for people, at a level chosen by flag.
package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger named after the binary. format is "json" or
// "console"; level is debug, info, warn or error.
func New(name, format, level string) (*zap.Logger, error) {
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
