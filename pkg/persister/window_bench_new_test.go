package persister

import "github.com/readstate/receipts/pkg/kinds"

func newBenchWindow(n int) *window {
	return newWindow(min(n, 4096), kinds.All(), &kinds.Env{MentionCap: 10})
}
