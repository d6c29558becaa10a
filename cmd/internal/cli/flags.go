// Package cli is the command kit every binary of cmd/ is built with: flags
// that can also be set from a RECEIPTS_* environment variable (flag
// "pg-url" ← RECEIPTS_PG_URL; the flag wins), usage text that shows each
// variable and default, the logger, the version, and the service binaries'
// shared shape (a migrate subcommand, the lifecycle runner). Connection
// configs register their own flags (kafkaconf.Config.RegisterFlags and the
// like); only commands import this package.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the variable for a flag name.
func EnvName(flagName string) string {
	return "RECEIPTS_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// Validator is a flag value that checks more than itself (a combination of
// flags, files they name): Parse calls Validate once every flag and
// variable is set. kafkaconf.Config.RegisterFlags registers one.
type Validator interface {
	Validate() error
}

// Parse parses args into fs, filling flags not given on the command line
// from their environment variables, rejects positional arguments, and runs
// the Validate method of every flag value that has one. Usage lists each
// flag with its variable and default.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, EnvName(f.Name))
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Every command of the project takes flags only: a stray word is most
	// likely a flag without its dashes, so say so rather than ignore it.
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", EnvName(f.Name), v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	var invalid []error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(Validator); ok {
			if err := v.Validate(); err != nil {
				invalid = append(invalid, err)
			}
		}
	})
	return errors.Join(invalid...)
}

// PrintDefaults lists every flag with its environment variable and its
// default, zero defaults included (flag.PrintDefaults leaves those out).
func PrintDefaults(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		typ, use := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		fmt.Fprintf(w, "  --%s%s\n", f.Name, typ)
		fmt.Fprintf(w, "        %s (default %q)\n", strings.ReplaceAll(use, "\n", "\n        "), f.DefValue)
	})
}

// CommandFlags returns the flag set of a subcommand of binary, whose -h
// prints "Usage: <binary> <synopsis>" and every flag.
func CommandFlags(binary, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(binary+" "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s\n\nFlags:\n", binary, synopsis)
		PrintDefaults(fs)
	}
	return fs
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
