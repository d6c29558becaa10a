package persister

// SetOnLinger installs a function run each time a linger starts, so a test
// can act while a batch is in hand without sleeping. Call it before Run.
func (p *Persister) SetOnLinger(f func()) { p.onLinger = f }

// SetOnTombstones installs a function run after each window's tombstone
// lookup, before its rows are written, with the window's users: a test
// erases a user there as another process would. Call it before Run.
func (p *Persister) SetOnTombstones(f func(users []string)) { p.onTombstones = f }
