package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The read-by view (pkg/views/readby) keeps its keys in the channel's
// slot, beside the membership hash; what the gateway asks the hash for
// it is here until the members kind owns its layout.

// luaViewCmp orders decimal numerals (LuaCmp).
const luaViewCmp = `
local function cmp(a, b)
  if a == b then return 0 end
  if #a ~= #b then if #a < #b then return -1 else return 1 end end
  if a < b then return -1 end
  return 1
end
`

// UntrackedChannels reports which of channels Redis knows to have no
// membership registers at all (their membership hash is complete and
// holds none): their views stay empty (viewApplyScript), so the gateway
// need not build their moves. Read after a merge, it is safe to act on: a
// join registers its member before it publishes the cursors the member
// holds, which include the merge.
func (s *Store) UntrackedChannels(ctx context.Context, channels []string) (map[string]bool, error) {
	type probe struct {
		markers *redis.SliceCmd
		size    *redis.IntCmd
	}
	probes := make([]probe, len(channels))
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cm := s.ChannelMembersKey(ch)
			probes[i] = probe{pipe.HMGet(ctx, cm, loadedField, countField), pipe.HLen(ctx, cm)}
		}
	}); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(channels))
	for i, ch := range channels {
		markers, err := probes[i].markers.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if markers[0] == nil {
			continue // not complete: it may have members Redis lost
		}
		n := int64(1)
		if markers[1] != nil {
			n++
		}
		out[ch] = probes[i].size.Val() == n
	}
	return out, nil
}
