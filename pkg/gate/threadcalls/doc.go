// Package threadcalls answers the thread calls (MarkThreadRead,
// MarkThreadUnread, FollowThread, UnfollowThread, NotifyThreadReply,
// ListThreads, GetThreadMessageReceipts, GetThreadTicks) and the thread
// counts the unread answers and the inbox show. It keeps a user's thread
// registers in Redis within Config.ThreadsPerUser (threadcollect.go) and
// copies in the deletion sets the counts read (deletionsets.go).
package threadcalls
