package threadcalls

import (
	"golang.org/x/sync/singleflight"

	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
)

// Threads answers the thread calls (marks, follows, reply notices,
// lists, read-by of replies) and the thread counts the unread answers
// and the inbox show, and keeps a user's thread registers in Redis
// within Config.ThreadsPerUser.
type Threads struct {
	*registers
	readBy *readbycalls.ReadBy
}

// registers is the storage side of a user's thread registers in Redis:
// restored from Postgres when Redis lost them or collected them (past
// Config.ThreadsPerUser, threadcollect.go), and the deletion sets their
// counts read copied in.
type registers struct {
	*seam.Core
	// collecting runs one collection of a user's thread registers at a
	// time (threadcollect.go).
	collecting singleflight.Group
	// hydratingSets runs one background copy of a deletion set at a time
	// (deletionsets.go).
	hydratingSets singleflight.Group
}

// New returns the thread calls on core; readBy keeps the replies' read-by
// view.
func New(core *seam.Core, readBy *readbycalls.ReadBy) *Threads {
	return &Threads{registers: &registers{Core: core}, readBy: readBy}
}
