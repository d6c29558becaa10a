package gate

import "github.com/readstate/receipts/pkg/kinds/deletions"

// deletionStore is the deletion kind's storage on the gateway's stores.
func (g *Gate) deletionStore() deletions.Store { return deletions.NewStore(g.PG, g.Redis) }
