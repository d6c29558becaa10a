package gate

import "errors"

// The contract's read-by, watch, privacy and erasure RPCs (issue 9) are
// being built; until each lands it answers Unimplemented, as connect's
// generated default would.
var errUnimplemented = errors.New("not implemented yet")
