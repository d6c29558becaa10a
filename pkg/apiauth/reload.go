package apiauth

// Reloading the credentials: the token, scopes and key files and the
// certificate, on change or SIGHUP, and the JWKS URL on its schedule.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Run reloads the token file, the client scopes file, the JWT key files
// and the server certificate when they change (checked every
// ReloadInterval) or on SIGHUP, and fetches the JWKS URL every
// JWKSRefresh (and for a token whose key id it lacks), until ctx ends. A
// file that fails to load keeps the previous version (see Reload).
// Without any of them it only waits for ctx.
func (g *Guard) Run(ctx context.Context) error {
	files := g.watchedFiles()
	var refresh <-chan time.Time
	var refetch <-chan struct{}
	if g.cfg.JWKSURL != "" {
		t := time.NewTicker(g.cfg.JWKSRefresh)
		defer t.Stop()
		refresh, refetch = t.C, g.jwt.refetch
	}
	if len(files) == 0 && refresh == nil {
		<-ctx.Done()
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(g.cfg.ReloadInterval)
	defer tick.Stop()
	last := g.loadedFP
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			g.Reload()
			last = fingerprint(files)
			if refresh != nil {
				g.refreshJWKS(ctx)
			}
		case <-tick.C:
			if fp := fingerprint(files); fp != last {
				last = fp
				g.Reload()
			}
		case <-refresh:
			g.refreshJWKS(ctx)
		case <-refetch:
			g.refreshJWKSSoon(ctx)
		}
	}
}

// reloadFailure is a reload that failed: when, and why.
type reloadFailure struct {
	at  time.Time
	err error
}

// Reload re-reads the token file, the client scopes file, the JWT key
// files and the certificate pair now. A file that fails to load keeps its previous
// version in force (a broken Secret edit does not lock the clients out),
// counts in auth_reload_failures_total, sets auth_last_reload_successful
// to 0 and shows in Status until a reload succeeds.
func (g *Guard) Reload() {
	var errs []error
	failed := func(file string, err error) {
		g.m.reloadFailures.WithLabelValues(file).Inc()
		errs = append(errs, err)
	}
	if g.cfg.TokenFile != "" {
		if s, err := loadTokens(g.cfg.TokenFile); err != nil {
			g.log.Error("reloading the API token file; keeping the previous tokens", zap.Error(err))
			failed(fileTokens, err)
		} else {
			g.storeTokens(s)
			g.log.Info("reloaded the API token file", zap.Int("num_tokens", len(s.digests)))
		}
	}
	if g.cfg.ClientScopesFile != "" {
		if m, err := loadClientScopes(g.cfg.ClientScopesFile); err != nil {
			g.log.Error("reloading the API client scopes file; keeping the previous scopes", zap.Error(err))
			failed(fileClientScopes, err)
		} else {
			g.certScopes.Store(&m)
			g.log.Info("reloaded the API client scopes file", zap.Int("num_subjects", len(m)))
		}
	}
	if g.jwt != nil {
		g.reloadJWTFiles(failed)
	}
	if g.cfg.TLS() {
		if err := g.loadCert(); err != nil {
			g.log.Error("reloading the API's TLS certificate; keeping the previous one", zap.Error(err))
			failed(fileCertificate, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		g.reloadErr.Store(&reloadFailure{at: time.Now(), err: err})
	} else {
		g.reloadErr.Store(nil)
	}
	g.updateReloadOK()
}

// Status is "" while the files in force are the latest, else what failed
// to reload and since when (for /readyz; the errors name files and lines,
// never a token). A failed reload does not make the API unready: the
// previous tokens still serve, and every replica reads the same Secret, so
// unready would take the whole API out of service over a bad edit.
func (g *Guard) Status() string {
	var lines []string
	if f := g.reloadErr.Load(); f != nil {
		lines = append(lines, fmt.Sprintf("auth files failed to reload at %s, the previous versions are in force: %s",
			f.at.UTC().Format(time.RFC3339), strings.ReplaceAll(f.err.Error(), "\n", "; ")))
	}
	if f := g.jwksErr.Load(); f != nil {
		lines = append(lines, fmt.Sprintf("the JWKS failed to load at %s, the previous keys (if any) are in force: %s",
			f.at.UTC().Format(time.RFC3339), f.err))
	}
	return strings.Join(lines, "; ")
}

func (g *Guard) watchedFiles() []string {
	var files []string
	for _, f := range []string{g.cfg.TokenFile, g.cfg.ClientScopesFile, g.cfg.CertFile, g.cfg.KeyFile, g.cfg.JWTHS256KeyFile, g.cfg.JWKSFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// fingerprint is the files' sizes and modification times: what changes
// when a file is rewritten or a Kubernetes Secret volume swaps its link.
func fingerprint(files []string) string {
	var b strings.Builder
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", f, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}
