package drift

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/redisstore"
)

// The sweep of the privacy settings: user_settings walked in
// Postgres pages and the us:{user} hashes in Redis SCAN pages, compared by
// privacy.Merge (the greater version wins; on a tie the one sharing
// less) and repaired both ways with it. A user without a row and a Redis
// entry of version 0 (the defaults cached after a Postgres read) both
// mean the defaults: never drift. A Redis register ahead within the grace
// period is in flight. A register repaired into Redis is applied to the
// user's channel views (redisstore.ApplySettingsToViews), so a kind the
// user stopped sharing leaves them.

// KindSettings is the privacy settings' key of Report.ByKind.
const KindSettings = "settings"

// settingsWork is the work found in one page of settings.
type settingsWork struct {
	found           Counts
	inFlight        int
	toPG, toRedis   []privacy.Settings
	dirPG, dirRedis []string
}

// compareSettings classifies one user's registers (nil: no Postgres row,
// no Redis entry).
func (s *Sweeper) compareSettings(w *settingsWork, user string, pg, rd *privacy.Settings) {
	pgv := privacy.Default(user)
	if pg != nil {
		pgv = *pg
	}
	merged := pgv
	if rd != nil {
		merged, _ = privacy.Merge(pgv, *rd)
	}
	if merged != pgv {
		if !s.graceOver(merged.VersionMs) {
			w.inFlight++
			return
		}
		dir := DirRedisAhead
		if pg == nil {
			dir = DirPostgresMissing
		}
		w.found.add(dir, 1)
		w.toPG, w.dirPG = append(w.toPG, merged), append(w.dirPG, dir)
	}
	if pg != nil && (rd == nil || merged != *rd) {
		dir := DirPostgresAhead
		if rd == nil {
			dir = DirRedisMissing
		}
		w.found.add(dir, 1)
		w.toRedis, w.dirRedis = append(w.toRedis, merged), append(w.dirRedis, dir)
	}
}

func (s *Sweeper) sweepSettingsPG(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	after := ""
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := s.cfg.Postgres.SettingsPage(ctx, after, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("reading postgres settings after %q: %w", after, err)
		}
		rep.Pages++
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].User
		users := make([]string, len(page))
		for i, st := range page {
			users[i] = st.User
		}
		rd, found, err := s.cfg.Redis.Settings(ctx, users)
		if err != nil {
			return fmt.Errorf("reading redis settings: %w", err)
		}
		w := &settingsWork{}
		for i := range page {
			var r *privacy.Settings
			if found[i] {
				r = &rd[i]
			}
			s.compareSettings(w, users[i], &page[i], r)
		}
		if err := s.applySettings(ctx, w, rep); err != nil {
			return err
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
	}
}

func (s *Sweeper) sweepSettingsRedis(ctx context.Context, lim *rate.Limiter, rep *Report) error {
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		users, next, err := s.cfg.Redis.ScanSettingsUsers(ctx, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis settings: %w", err)
		}
		rep.Pages++
		valid := scannedIDs("user_id", users, rep)
		if len(valid) > 0 {
			rd, found, err := s.cfg.Redis.Settings(ctx, valid)
			if err != nil {
				return fmt.Errorf("reading redis settings: %w", err)
			}
			inPG, err := s.cfg.Postgres.StoredSettings(ctx, valid)
			if err != nil {
				return fmt.Errorf("reading postgres settings: %w", err)
			}
			w := &settingsWork{}
			for i, u := range valid {
				if _, ok := inPG[u]; ok || !found[i] {
					continue // in both stores: the Postgres walk compared it; gone since the scan
				}
				s.compareSettings(w, u, nil, &rd[i])
			}
			if err := s.applySettings(ctx, w, rep); err != nil {
				return err
			}
		}
		if cursor = next; cursor.Done() {
			return nil
		}
	}
}

func settingsUser(st privacy.Settings) string        { return st.User }
func settingsTime(st privacy.Settings) (int64, bool) { return st.VersionMs, true }

// settingsUsers lists the distinct users of some settings repairs.
func settingsUsers(lists ...[]privacy.Settings) []string {
	var users []string
	for _, l := range lists {
		for _, st := range l {
			users = append(users, st.User)
		}
	}
	return usersOf(users)
}

// applySettings writes a page's settings repairs, each a merge, and
// counts them; registers of erased users are not copied (as cursors).
func (s *Sweeper) applySettings(ctx context.Context, w *settingsWork, rep *Report) error {
	rep.Found.merge(w.found)
	rep.byKind(KindSettings).merge(w.found)
	rep.InFlight += w.inFlight
	s.m.inFlight.Add(float64(w.inFlight))
	for _, d := range []string{DirRedisAhead, DirPostgresAhead, DirRedisMissing, DirPostgresMissing} {
		if n := countDir(w.found, d); n > 0 {
			s.m.found.WithLabelValues(d).Add(float64(n))
		}
	}
	if len(w.toPG) == 0 && len(w.toRedis) == 0 {
		return nil
	}
	e, err := s.erasuresOf(ctx, settingsUsers(w.toPG, w.toRedis))
	if err != nil {
		rep.Failed += len(w.toPG) + len(w.toRedis)
		return fmt.Errorf("reading the tombstones of a page: %w", err)
	}
	var a, b int
	w.toPG, w.dirPG, a = keepLive(e, w.toPG, w.dirPG, settingsUser, settingsTime)
	w.toRedis, w.dirRedis, b = keepLive(e, w.toRedis, w.dirRedis, settingsUser, settingsTime)
	rep.Erased += a + b
	if len(w.toPG) > 0 {
		if _, err := s.cfg.Postgres.UpsertSettings(ctx, w.toPG); err != nil {
			rep.Failed += len(w.toPG)
			if pgstore.Classify(err) != errclass.Rejected {
				return fmt.Errorf("repairing %d postgres settings: %w", len(w.toPG), err)
			}
			s.log.Warn("repairing postgres settings: rejected", zap.Int("num_rows", len(w.toPG)), zap.Error(err))
		} else {
			for _, d := range w.dirPG {
				s.repaired(rep, d)
			}
		}
	}
	if len(w.toRedis) > 0 {
		stored, err := s.cfg.Redis.MergeSettings(ctx, w.toRedis)
		if err != nil {
			rep.Failed += len(w.toRedis)
			return fmt.Errorf("repairing %d redis settings: %w", len(w.toRedis), err)
		}
		for i, st := range stored {
			if err := s.cfg.Redis.ApplySettingsToViews(ctx, st, 0); err != nil {
				rep.Failed += len(stored) - i
				return fmt.Errorf("applying the settings of %s to its channel views: %w", st.User, err)
			}
			s.repaired(rep, w.dirRedis[i])
		}
	}
	return nil
}
