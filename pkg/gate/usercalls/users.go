package usercalls

import (
	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
)

// Users answers the calls about a user as a whole: the privacy settings
// (which the read-by view follows) and erasure.
type Users struct {
	*seam.Core
	readBy *readbycalls.ReadBy
}

// New returns the user calls on core; readBy applies a settings change to
// the read-by view.
func New(core *seam.Core, readBy *readbycalls.ReadBy) *Users {
	return &Users{Core: core, readBy: readBy}
}
