package kinds

import (
	"slices"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/fullyread"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgstore"
)

// The kinds of state, in the order the loops visit them.
var (
	Cursors  = cursors.Kind
	Heads    = heads.Kind
	Members  = members.Kind
	Mentions = mentions.Kind
	Settings = settings.Kind

	Notifications = notifications.Kind
	Deletions     = deletions.Kind

	GroupMentions = groupmentions.Kind

	ThreadHeads  = threads.HeadKind
	ThreadStates = threads.StateKind

	FullyRead = fullyread.Kind
)

// All returns every kind of state. A caller may append kinds of its own
// (a test's throwaway kind) and hand the list to a service's config.
func All() []kind.Kind {
	return []kind.Kind{Cursors, Heads, Members, Mentions, Settings, ThreadHeads, ThreadStates, Notifications, Deletions, GroupMentions, FullyRead}
}

// ErasedTables are the tables of the kinds an erasure deletes a user's
// rows from (kind.PGErase), each the kind's table (its Name); the
// read-by view's move log is erased beside them (readby.MoveLogErasure).
func ErasedTables() []string {
	var out []string
	for _, k := range All() {
		if k.PGErase() != "" {
			out = append(out, k.Name())
		}
	}
	return out
}

// RedactedColumns are the columns an erasure redacts where they name the
// user in rows that are not the user's: the driver's own
// (pgstore.RedactedColumns) and those of the kinds that bring their own
// redaction (kind.PGRedact).
func RedactedColumns() []string {
	out := slices.Clone(pgstore.RedactedColumns)
	for _, k := range All() {
		if k.PGRedact() != "" {
			out = append(out, k.PGRedacted()...)
		}
	}
	return out
}
