package kinds

import "github.com/readstate/receipts/pkg/kind"

// The kinds of state, in the order the loops visit them.
var (
	Cursors  = kind.New(cursorSpec)
	Heads    = kind.New(headSpec)
	Members  = kind.New(memberSpec)
	Mentions = kind.New(mentionSpec)
	Settings = kind.New(settingsSpec)

	Notifications = kind.New(notificationSpec)
	Deletions     = kind.New(deletionSpec)

	GroupMentions = kind.New(groupMentionSpec)

	ThreadHeads  = kind.New(threadHeadSpec)
	ThreadStates = kind.New(threadStateSpec)
)

// All returns every kind of state. A caller may append kinds of its own
// (a test's throwaway kind) and hand the list to a service's config.
func All() []kind.Kind {
	return []kind.Kind{Cursors, Heads, Members, Mentions, Settings, ThreadHeads, ThreadStates, Notifications, Deletions, GroupMentions}
}
