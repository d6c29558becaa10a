package persister

// SetOnLinger installs a function run each time a linger starts, so a test
// can act while a batch is in hand without sleeping. Call it before Run.
func (p *Persister) SetOnLinger(f func()) { p.onLinger = f }
