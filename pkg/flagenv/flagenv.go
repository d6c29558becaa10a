// Package flagenv lets every flag of a binary also be set from a RECEIPTS_*
// environment variable (flag "pg-url" ← RECEIPTS_PG_URL), with the flag
// winning when both are given, and shows the variable in --help.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the variable for a flag name.
func EnvName(flagName string) string {
	return "RECEIPTS_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// Parse parses args into fs, filling flags not given on the command line
// from their environment variables, and rejects positional arguments. Usage lists each flag with its variable
// and default.
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
	return nil
}

// List is a comma-separated string list flag value.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated values.
func (l *List) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
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
