package pgstore

import (
	"context"
	"errors"
	"fmt"
)

// SettingDetailThreshold names the detail threshold in deployment_settings:
// the gateway's read-by detail and the persister's cursor-move log must use
// the same one.
const SettingDetailThreshold = "detail_threshold"

// SettingMentionCap names the mention cap in deployment_settings: every
// store keeps each key's newest cap+1 mention seqs, so the gateway (Redis),
// the persister (Postgres) and the reconciler's repairs must use the same.
const SettingMentionCap = "mention_cap"

// ErrSettingDisagrees is AgreeSetting's answer when the deployment stored
// another value.
var ErrSettingDisagrees = errors.New("disagrees with the value the deployment stored")

// AgreeSetting stores value as the deployment's setting name unless one is
// stored already, and fails with ErrSettingDisagrees when the stored value
// differs from value: two services configured differently cannot both run.
func (s *Store) AgreeSetting(ctx context.Context, name string, value int64) error {
	var stored int64
	err := s.pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO deployment_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value)
		SELECT value FROM ins UNION ALL SELECT value FROM deployment_settings WHERE name = $1 LIMIT 1`, name, value).Scan(&stored)
	if err != nil {
		return fmt.Errorf("agreeing on setting %s: %w", name, classify(err))
	}
	if stored != value {
		return fmt.Errorf("setting %s is %d here and %d in Postgres (deployment_settings): %w; make every service's flag agree, or UPDATE the row", name, value, stored, ErrSettingDisagrees)
	}
	return nil
}
