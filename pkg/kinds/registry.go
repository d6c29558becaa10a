package kinds

// The kinds of state, in the order the loops visit them.
var (
	Cursors  = New(cursorSpec)
	Heads    = New(headSpec)
	Members  = New(memberSpec)
	Mentions = New(mentionSpec)
	Settings = New(settingsSpec)

	Notifications = New(notificationSpec)
	Deletions     = New(deletionSpec)

	GroupMentions = New(groupMentionSpec)

	ThreadHeads  = New(threadHeadSpec)
	ThreadStates = New(threadStateSpec)
)

// All returns every kind of state. A caller may append kinds of its own
// (a test's throwaway kind) and hand the list to a service's config.
func All() []Kind {
	return []Kind{Cursors, Heads, Members, Mentions, Settings, ThreadHeads, ThreadStates, Notifications, Deletions, GroupMentions}
}
