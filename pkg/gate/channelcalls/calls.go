package channelcalls

import (
	"github.com/readstate/receipts/pkg/gate/markcalls"
	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
)

// Channels answers what upstream tells of a channel — message notices
// (heads, mentions, group mentions; thread replies go to threads),
// deletions, joins and leaves — and GetChannel.
type Channels struct {
	*seam.Core
	readBy  *readbycalls.ReadBy
	marks   *markcalls.Marks
	threads *threadcalls.Threads
}

// New returns the channel calls on core: a notice raises its sender's
// cursors as a mark does (marks), a reply notice is a thread's (threads),
// and a join or leave changes the read-by view (readBy).
func New(core *seam.Core, readBy *readbycalls.ReadBy, marks *markcalls.Marks, threads *threadcalls.Threads) *Channels {
	return &Channels{Core: core, readBy: readBy, marks: marks, threads: threads}
}
