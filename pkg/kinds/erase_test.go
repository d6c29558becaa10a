package kinds_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/pgtest"
)

// Every column that may name a user is the user_id of a table an erasure
// deletes from (a kind's, kinds.ErasedTables, or the move log), of the
// tombstone table itself, or one of kinds.RedactedColumns: a new
// per-user table fails here until the driver or its kind erases it.
func TestErasureCoversEveryColumnNamingAUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	rows, err := s.Pool().Query(ctx, `SELECT c.relname, a.attname FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
WHERE (a.attname LIKE '%user_id' OR a.attname LIKE '%sender_id' OR a.attname LIKE 'record_%')
AND NOT a.attisdropped AND c.relkind IN ('r', 'p') AND NOT c.relispartition
AND c.relnamespace = current_schema()::regnamespace`)
	require.NoError(t, err)
	// The read-by view's move log is erased beside the kinds
	// (readby.MoveLogErasure; a view is not imported here).
	erased, redacted := append(kinds.ErasedTables(), "cursor_moves"), kinds.RedactedColumns()
	userTables := 0
	for rows.Next() {
		var table, col string
		require.NoError(t, rows.Scan(&table, &col))
		if col == "user_id" {
			userTables++
			if table == "user_tombstones" || slices.Contains(erased, table) {
				continue
			}
		}
		require.Contains(t, redacted, table+"."+col, "%s.%s may name a user: erase it (a kind's PGErase) or redact it (pgstore.RedactedColumns or a kind's PGRedact)", table, col)
	}
	require.NoError(t, rows.Err())
	require.Positive(t, userTables)
}
