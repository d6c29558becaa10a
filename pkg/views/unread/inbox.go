package unread

// What the inbox orders by: a user's default channel set with each
// channel's head, read without counting.

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Inbox is what the inbox sorts by: a user's channels with their heads.
type Inbox struct {
	// Heads are the heads of the user's default channel set, in channel
	// order.
	Heads []channel.Head
	// Complete is false when Redis cannot answer alone (a user hash not
	// hydrated, a head unknown or undecodable): read the counts, which
	// hydrate, and ask again.
	Complete bool
}

// Order reads a user's default channel set (as ReadPage does, in
// channel order) and the head of each of its channels, without counting.
// Two round trips: the channels of the user's cursor and membership
// hashes (fields only), the hash's count of left registers and the
// riders (the thread probe; channels nil: not known yet); then one MGET
// of the heads, with the registers' values only when the user may have
// left a channel (the count is not 0) to leave those out. The values were a third of the strings the inbox read, to find
// channels most users never left.
func (s Store) Order(ctx context.Context, user string, riders ...Rider) (Inbox, error) {
	var fields, regFields *redis.StringSliceCmd
	var leftCount *redis.StringCmd
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		fields = pipe.HRandField(ctx, s.cursorStore().RedisKey(user), redisstore.WholeHashCount)
		regFields = pipe.HRandField(ctx, s.memberStore().UserMembersKey(user), redisstore.WholeHashCount)
		leftCount = pipe.HGet(ctx, s.memberStore().UserMembersKey(user), members.LeftCountField)
		queueRiders(ctx, pipe, riders, user, nil)
	}); err != nil {
		return Inbox{}, fmt.Errorf("reading the channels of %s: %w", user, err)
	}
	cursors, err := keysTable(user, fields)
	if err != nil {
		return Inbox{}, err
	}
	regs, err := keysTable(user, regFields)
	if err != nil {
		return Inbox{}, err
	}
	channels, err := unionOf(user, cursors, regs)
	if err != nil {
		return Inbox{}, err
	}
	out := Inbox{Complete: cursors.loaded && regs.loaded}
	if len(channels) == 0 {
		return out, nil
	}
	var read *heads.ChannelValues
	var regValues *redis.SliceCmd
	mayHaveLeft := leftCount.Val() != "0"
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		read = s.headStore().QueueChannelValues(ctx, pipe, channels)
		if mayHaveLeft && len(regs.entries) > 0 {
			regValues = pipe.HMGet(ctx, s.memberStore().UserMembersKey(user), regKeys(regs)...)
		}
	}); err != nil {
		return Inbox{}, err
	}
	kept := channels
	if regValues != nil {
		vals, err := regValues.Result()
		if err != nil {
			return Inbox{}, fmt.Errorf("%w: reading the memberships of %s: %w", redisstore.ErrUnavailable, user, err)
		}
		for i, v := range vals {
			regs.entries[i].Value, _ = v.(string) // gone meanwhile (erased): no register
		}
		kept, _ = pageOf(slices.Clone(channels), regs, user, Page{})
	}
	out.Heads = make([]channel.Head, 0, len(kept))
	k := 0
	for i, ch := range channels {
		if k == len(kept) || kept[k] != ch {
			continue // left
		}
		k++
		v, known, err := read.Head(i)
		if err != nil {
			return Inbox{}, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		if !known {
			out.Complete = false
			continue
		}
		h, err := redisstore.DecodeHead(ch, v)
		if err != nil {
			s.redis.SkipUndecodable()
			out.Complete = false
			continue
		}
		out.Heads = append(out.Heads, h)
	}
	return out, nil
}

// keysTable is a user hash's fields (an HRANDFIELD without values) as a
// table without values.
func keysTable(user string, cmd *redis.StringSliceCmd) (fieldTable, error) {
	fs, err := cmd.Result()
	if err := userHashErr(user, len(fs), err); err != nil {
		return fieldTable{}, err
	}
	kvs := make([]redis.KeyValue, len(fs))
	for i, f := range fs {
		kvs[i].Key = f
	}
	return newFieldTable(kvs), nil
}

// regKeys is a table's fields, in its order.
func regKeys(t fieldTable) []string {
	out := make([]string, len(t.entries))
	for i, kv := range t.entries {
		out[i] = kv.Key
	}
	return out
}
