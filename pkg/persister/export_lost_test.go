package persister

import "context"

// LosePartitions runs the persister's OnPartitionsLost callback for the
// given partitions, as kgo does when the group session is lost, so a test
// can check what the persister does with their settled offsets without
// racing a real rejoin.
func (p *Persister) LosePartitions(lost map[string][]int32) {
	p.onLost(context.Background(), p.cl, lost)
}
