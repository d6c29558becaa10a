package unread

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// ChannelView is one user's state in one channel as a store holds it,
// and its counts.
type ChannelView struct {
	Channel string
	Input
	// Unread, FirstUnread, Mentions and MentionsCapped are Count's at no
	// level: the unread messages, and the explicit mentions alone.
	Unread, FirstUnread int64
	Mentions            int64
	MentionsCapped      bool
	// mentionCap is the cap the read counted with (its Store's).
	mentionCap int
	// countDeletions: the Redis read is to count the channel's deletions
	// (some, with unread messages).
	countDeletions bool
}

// newChannelView is the view of in, counted.
func newChannelView(ch string, in Input, mentionCap int) ChannelView {
	v := ChannelView{Channel: ch, Input: in, mentionCap: mentionCap}
	v.count()
	return v
}

// count sets the view's counts from its Input, in place (the views of a
// big page are large structs: copied whole, they showed in the read's
// time).
func (v *ChannelView) count() {
	c := Count(v.Input, Level{}, v.mentionCap)
	v.Unread, v.FirstUnread, v.Mentions, v.MentionsCapped = c.Unread, c.FirstUnread, c.Mentions, c.MentionsCapped
}

// At is the view's counts at a level (Count).
func (v *ChannelView) At(level notification.Level, muted bool) Counts {
	return Count(v.Input, Level{Level: level, Muted: muted}, v.mentionCap)
}

// MentionsAt is the view's mention count and whether it is capped, with
// the channel's group mentions when withGroup (the user's level is all
// or mentions) and without them otherwise.
func (v *ChannelView) MentionsAt(withGroup bool) (int64, bool) {
	l := notification.None
	if withGroup {
		l = notification.All
	}
	c := v.At(l, false)
	return c.Mentions, c.MentionsCapped
}

// Shown is a mention count as the API shows it: at most the cap the view
// counted with (MentionsCapped says "cap+").
func (v *ChannelView) Shown(mentions int64) int64 { return min(mentions, int64(v.mentionCap)) }

// UnreadView is one user's counts across channels, as Redis holds them.
type UnreadView struct {
	User     string
	Channels []ChannelView
	// CursorsComplete: the user's cursor hash is hydrated, so a channel
	// without a state has none. MembershipsComplete: the same for the
	// registers and the mention hash. When either is false, hydrate from
	// Postgres and read again.
	CursorsComplete, MembershipsComplete bool
	// MissingHeads lists the channels whose head Redis does not know;
	// MissingDeletions those whose deletions it does not (read Postgres
	// and deletions.Store.HydrateRedis); MissingGroupMentions those whose
	// group mentions it does not know (groupmentions.Store.HydrateRedis).
	MissingHeads, MissingDeletions, MissingGroupMentions []string
	// More: a page of the default set stopped short of its end.
	More bool
}

// A Rider is another read queued on the unread read's pipeline, sharing
// its round trip: the badge's notification levels
// (notifications.LevelsRead) and the thread probe (threads.Probe) ride
// with the heads. Queue adds the rider's commands for user and the
// channels the read answers (ascending; nil where the read does not know
// them yet: Order). It is not called when the read sends no such
// pipeline (no channel to answer); the rider's answer then says it was
// not read.
type Rider interface {
	Queue(ctx context.Context, pipe redis.Pipeliner, user string, channels []string)
}

var (
	_ Rider = (*notifications.LevelsRead)(nil)
	_ Rider = (*threads.Probe)(nil)
)

// Page bounds a read of a user's default channel set: the channels after
// After in channel order (all when empty), at most Limit (0: no bound
// but redisstore.MaxUnreadChannels). Left channels do not count toward
// Limit.
type Page struct {
	After string
	Limit int
}

// ChunkDefault is the most channels whose heads one pipeline reads: a
// bigger page is read in parts of at most this many. It also bounds the
// user hashes read in one pipeline (bigger ones are read at once, one
// connection each).
const ChunkDefault = 2000

// Store is the view's storage over the two drivers: make one where it is
// needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
	chunk int
	// mentionCap is the mention cap the view counts with ("cap+") and its
	// kinds' stores keep (cap+1 per key).
	mentionCap int
}

// NewStore is the view's storage on pg and rs (either may be nil when the
// caller uses only the other), counting with channel.MentionCapDefault
// until WithMentionCap says otherwise.
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store {
	return Store{pg: pg, redis: rs, chunk: ChunkDefault, mentionCap: channel.MentionCapDefault}
}

// WithMentionCap is s counting with the mention cap n (n <= 0: the
// default), and reading its kinds' stores with it: the deployment's cap,
// agreed at start, given once here.
func (s Store) WithMentionCap(n int) Store {
	if n > 0 {
		s.mentionCap = n
	}
	return s
}

// WithChunk is s reading n channels at once (ChunkDefault): a test makes
// it small to read the chunked path too.
func (s Store) WithChunk(n int) Store {
	s.chunk = n
	return s
}

// scripts are the scripts the view's reads run by SHA (loaded again when
// Redis lost them).
var scripts = deletions.Scripts

func (s Store) exec(ctx context.Context, build func(redis.Pipeliner)) error {
	_, err := s.redis.Exec(ctx, build, scripts...)
	return err
}

func (s Store) mentionStore() mentions.Store {
	return mentions.NewStore(s.pg, s.redis).WithMentionCap(s.mentionCap)
}

func (s Store) groupMentionStore() groupmentions.Store {
	return groupmentions.NewStore(s.pg, s.redis).WithMentionCap(s.mentionCap)
}

func (s Store) deletionStore() deletions.Store { return deletions.NewStore(s.pg, s.redis) }

func (s Store) cursorStore() cursors.Store { return cursors.NewStore(s.redis) }

func (s Store) headStore() heads.Store { return heads.NewStore(s.pg, s.redis) }

func (s Store) memberStore() members.Store { return members.NewStore(s.pg, s.redis) }
