package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// putDeletionsScript stands in for the deletion kind's write
// (pkg/kinds/deletions, which owns the sets; its tests read this view
// through them): it adds ARGV's seqs to KEYS[2], a channel's set, and
// keeps its size as the channel value's (KEYS[1]) count, known.
var putDeletionsScript = redis.NewScript(luaChannelValue + `
for i = 1, #ARGV do redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i]) end
local f = cvget(KEYS[1])
f[4] = tostring(redis.call('ZCARD', KEYS[2]))
cvset(KEYS[1], f)
return 1
`)

// putDeletions adds seqs to each channel's deletion set (none: the
// channels are known to have no deletions), in one pipeline.
func putDeletions(tb testing.TB, s *Store, seqs []int64, channels ...string) {
	tb.Helper()
	ctx := context.Background()
	args := make([]any, len(seqs))
	for i, q := range seqs {
		args[i] = q
	}
	pipe := s.rdb.Pipeline()
	for _, ch := range channels {
		putDeletionsScript.Eval(ctx, pipe, []string{s.HeadKey(ch), s.deletionsKey(ch)}, args...)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(tb, err)
}
