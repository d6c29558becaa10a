package drift

import "time"

// SetNow replaces the sweeper's clock.
func SetNow(s *Sweeper, now func() time.Time) { s.now = now }
