package readbycalls

import (
	"golang.org/x/sync/singleflight"

	"github.com/readstate/receipts/pkg/gate/seam"
)

// ReadBy answers read-by and ticks, of channels and of threads' roots, and
// keeps the read-by view (pkg/views/readby) current as cursors move, as
// members join and leave, and as users change what they share.
type ReadBy struct {
	*seam.Core
	// rebuilds runs one view rebuild per channel at a time: concurrent
	// reads of a channel whose view is not loaded share it.
	rebuilds singleflight.Group
	// RebuildHook, set by tests only, runs as a rebuild starts.
	RebuildHook func()
}

// New returns the read-by calls on core.
func New(core *seam.Core) *ReadBy { return &ReadBy{Core: core} }
