package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// ChannelFacts is what Redis holds of one channel for the gateway's
// checks: its head and whether its membership hash is complete and has
// registers.
type ChannelFacts struct {
	Channel string
	// Head is the channel's head; HeadKnown false means Redis knows
	// nothing of it (a known channel without messages has Seq 0).
	Head      channel.Head
	HeadKnown bool
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

// Facts reads, in one pipelined round trip, the facts of every channel
// of keys (once per channel) and the registers of every key: the checks
// of a write (seq within the head, membership) need nothing else. With
// userRegisters it also reads each key's register in the user's hash
// (what a join or leave orders itself after).
func (s *Store) Facts(ctx context.Context, keys []receipt.Key, userRegisters bool) (map[string]*ChannelFacts, []KeyFacts, error) {
	var parse func() (map[string]*ChannelFacts, []KeyFacts, error)
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		parse = s.queueFacts(ctx, pipe, keys, userRegisters)
	}); err != nil {
		return nil, nil, err
	}
	return parse()
}

// queueFacts adds the commands of Facts to pipe; the returned function
// reads their answers once the pipeline ran.
func (s *Store) queueFacts(ctx context.Context, pipe redis.Pipeliner, keys []receipt.Key, userRegisters bool) func() (map[string]*ChannelFacts, []KeyFacts, error) {
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
		c.head = pipe.Get(ctx, s.HeadKey(ch))
		c.markers = pipe.HMGet(ctx, cm, loadedField, countField)
		c.size = pipe.HLen(ctx, cm)
		c.regs = pipe.HMGet(ctx, cm, c.users...)
	}
	if userRegisters {
		for i, k := range keys {
			inUser[i] = pipe.HGet(ctx, s.UserMembersKey(k.User), k.Channel)
		}
	}
	return func() (map[string]*ChannelFacts, []KeyFacts, error) {
		return parseFacts(keys, order, chans, regAt, inUser)
	}
}

// factsCmds is the commands Facts queued for one channel.
type factsCmds struct {
	head    *redis.StringCmd
	markers *redis.SliceCmd
	size    *redis.IntCmd
	users   []string // the call's users of the channel, for regs
	at      map[string]int
	regs    *redis.SliceCmd
}

func parseFacts(keys []receipt.Key, order []string, chans map[string]*factsCmds, regAt []int, inUser []*redis.StringCmd) (map[string]*ChannelFacts, []KeyFacts, error) {
	facts := make(map[string]*ChannelFacts, len(chans))
	for _, ch := range order {
		c := chans[ch]
		f := &ChannelFacts{Channel: ch}
		v, err := c.head.Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		default:
			head, known, _, _ := splitChannelValue(v)
			if !known {
				break
			}
			if f.Head, err = decodeHead(ch, head); err != nil {
				return nil, nil, err
			}
			f.HeadKnown = true
		}
		markers, err := c.markers.Result()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		size := c.size.Val()
		for _, m := range markers {
			if m != nil {
				size--
			}
		}
		f.MembersComplete, f.Registered = markers[0] != nil, size > 0
		facts[ch] = f
	}
	out := make([]KeyFacts, len(keys))
	for i, k := range keys {
		out[i].Key = k
		regs, err := chans[k.Channel].regs.Result()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if v, ok := regs[regAt[i]].(string); ok {
			m, err := decodeRegister(k, v)
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
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m, err := decodeRegister(k, v)
	if err != nil {
		return nil, err
	}
	return &m, nil
}
