package members

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// ChannelFacts is what Redis holds of one channel's membership hash for
// the gateway's checks (pkg/gate/seam's facts, which add the head).
type ChannelFacts struct {
	// MembersComplete: the channel's membership hash is hydrated, so a
	// user without a register in it has none. Registered: it holds at
	// least one register (of a member or of a user who left).
	MembersComplete, Registered bool
}

// KeyFacts is what Redis holds of one (user, channel) for the checks.
type KeyFacts struct {
	Key receipt.Key
	// InChannel is the user's register in the channel's hash, nil when
	// absent; InUser the one in the user's hash (only when asked).
	InChannel, InUser *channel.Membership
}

// QueueFacts queues on pipe the membership reads of the checks of a
// write (seq within the head, membership): the channel hash's markers,
// size and registers of the call's users, once per channel of keys, and
// with userRegisters each key's register in the user's hash (what a join
// or leave orders itself after). It returns the channels of keys (each
// once, in the order of keys) and the function that reads the answers
// once the pipeline ran: one ChannelFacts per channel, in that order, and
// one KeyFacts per key. The caller queues the heads of the channels in
// the same pipeline, so the checks take one round trip.
func (s Store) QueueFacts(ctx context.Context, pipe redis.Pipeliner, keys []receipt.Key, userRegisters bool) ([]string, func() ([]ChannelFacts, []KeyFacts, error)) {
	chans := map[string]*factsCmds{}
	var order []string
	// Each key's register is read by one HMGET per channel (field n of
	// the channel's users), not one HGET per key.
	regAt := make([]int, len(keys))
	for i, k := range keys {
		c := chans[k.Channel]
		if c == nil {
			c = &factsCmds{at: map[string]int{}}
			chans[k.Channel] = c
			order = append(order, k.Channel)
		}
		n, ok := c.at[k.User]
		if !ok {
			n = len(c.users)
			c.at[k.User] = n
			c.users = append(c.users, k.User)
		}
		regAt[i] = n
	}
	inUser := make([]*redis.StringCmd, len(keys))
	for _, ch := range order {
		c := chans[ch]
		cm := s.ChannelMembersKey(ch)
		c.markers = pipe.HMGet(ctx, cm, redisstore.LoadedField, countField)
		c.size = pipe.HLen(ctx, cm)
		c.regs = pipe.HMGet(ctx, cm, c.users...)
	}
	if userRegisters {
		for i, k := range keys {
			inUser[i] = pipe.HGet(ctx, s.UserMembersKey(k.User), k.Channel)
		}
	}
	return order, func() ([]ChannelFacts, []KeyFacts, error) {
		return parseFacts(keys, order, chans, regAt, inUser)
	}
}

// factsCmds is the commands QueueFacts queued for one channel.
type factsCmds struct {
	markers *redis.SliceCmd
	size    *redis.IntCmd
	users   []string // the call's users of the channel, for regs
	at      map[string]int
	regs    *redis.SliceCmd
}

func parseFacts(keys []receipt.Key, order []string, chans map[string]*factsCmds, regAt []int, inUser []*redis.StringCmd) ([]ChannelFacts, []KeyFacts, error) {
	facts := make([]ChannelFacts, len(order))
	for i, ch := range order {
		c := chans[ch]
		markers, err := c.markers.Result()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		size := c.size.Val()
		for _, m := range markers {
			if m != nil {
				size--
			}
		}
		facts[i] = ChannelFacts{MembersComplete: markers[0] != nil, Registered: size > 0}
	}
	out := make([]KeyFacts, len(keys))
	for i, k := range keys {
		out[i].Key = k
		regs, err := chans[k.Channel].regs.Result()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		if v, ok := regs[regAt[i]].(string); ok {
			m, err := DecodeRegister(k, v)
			if err != nil {
				return nil, nil, err
			}
			out[i].InChannel = &m
		}
		if inUser[i] != nil {
			if out[i].InUser, err = optionalRegister(k, inUser[i]); err != nil {
				return nil, nil, err
			}
		}
	}
	return facts, out, nil
}

func optionalRegister(k receipt.Key, cmd *redis.StringCmd) (*channel.Membership, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	m, err := DecodeRegister(k, v)
	if err != nil {
		return nil, err
	}
	return &m, nil
}
