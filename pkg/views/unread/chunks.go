package unread

// The read of a big page of a user's default channel set, in parts read
// at once (see readChunked).

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/kinds/heads"
)

// readChunked ends read for a page of more than s.chunk channels: the
// page is cut into parts read at once, each on its own pooled
// connection, each part's heads read and its counts made in its own
// goroutine. Redis runs one command at a time, but the gateway then
// decodes a part while Redis answers the next, and the parts' decoding
// uses every core (at 10,000 channels the one pipeline left Redis and the
// gateway each waiting on the other for half the call). The mention hash
// may still be arriving: each part waits for it after its heads. The
// answer is the one read gives: the same views and missing heads, in
// channel order. The riders (the notification levels, the thread
// probe) are read on one more connection meanwhile, as the small page
// reads them with its heads (read on their own after the counts, the
// levels were an HMGET of every channel, mostly answering nil, and one
// more round trip).
func (s Store) readChunked(ctx context.Context, view UnreadView, channels []string, hs *userHashes, riders []Rider) (UnreadView, error) {
	size := s.chunk
	type part struct {
		lo      int
		views   []ChannelView // within all, from lo
		missing []string
		// undeleted and groupMissing: the part's channels whose deletions
		// and group mentions Redis does not know.
		undeleted, groupMissing []string
		err                     error
	}
	parts := make([]part, (len(channels)+size-1)/size)
	all := make([]ChannelView, len(channels))
	var wg sync.WaitGroup
	wg.Go(func() {
		// A failure here fails the riders' commands: each then answers
		// "not read".
		_ = s.exec(ctx, func(pipe redis.Pipeliner) {
			queueRiders(ctx, pipe, riders, view.User, channels)
		})
	})
	for i := range parts {
		lo, hi := i*size, min((i+1)*size, len(channels))
		wg.Go(func() {
			p, chs := &parts[i], channels[lo:hi]
			p.lo = lo
			var heads *heads.ChannelValues
			if p.err = s.exec(ctx, func(pipe redis.Pipeliner) {
				heads = s.headStore().QueueChannelValues(ctx, pipe, chs)
			}); p.err != nil {
				return
			}
			mentionTable, err := hs.waitMentions()
			if err != nil {
				p.err = err
				return
			}
			p.views, p.missing, p.undeleted, p.err = s.counted(ctx, all[lo:lo:hi], nil, nil, view.User, chs, heads,
				hs.cursors.from(chs[0]), hs.regs.from(chs[0]), mentionTable.from(chs[0]), true)
			if p.err == nil {
				p.groupMissing, p.err = s.readGroupMentions(ctx, p.views, chs, heads.Tops(len(chs)), nil)
			}
			if p.err == nil {
				p.undeleted, p.err = s.readDeletions(ctx, p.views, p.undeleted)
			}
			for j := range p.views {
				p.views[j].count()
			}
		})
	}
	wg.Wait()
	mentionTable, err := hs.waitMentions()
	if err != nil {
		return view, err
	}
	view.MembershipsComplete = hs.regs.loaded && mentionTable.loaded
	// The parts' views, moved together where a part left some out.
	n := 0
	for _, p := range parts {
		if p.err != nil {
			return view, p.err
		}
		if p.lo != n {
			copy(all[n:], p.views)
		}
		n += len(p.views)
		view.MissingHeads = append(view.MissingHeads, p.missing...)
		view.MissingDeletions = append(view.MissingDeletions, p.undeleted...)
		view.MissingGroupMentions = append(view.MissingGroupMentions, p.groupMissing...)
	}
	view.Channels = all[:n]
	return view, nil
}
