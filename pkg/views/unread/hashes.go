package unread

// The user's hashes that bound a default channel set (cursors,
// memberships, mentions), read whole and kept as sorted tables.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// userHashes is a user's cursor, membership and mention hashes, each as
// a sorted table. For a big user the mentions may still be arriving
// (waitMentions): the heads are read meanwhile.
type userHashes struct {
	cursors, regs fieldTable
	mentionsDone  chan struct{}
	mentions      fieldTable
	mentionsErr   error
}

func (h *userHashes) waitMentions() (fieldTable, error) {
	<-h.mentionsDone
	return h.mentions, h.mentionsErr
}

// userHashes reads the three hashes that bound a user's default channel
// set, after checking that they are within redisstore.MaxUnreadChannels (a user is
// mentioned only where a member, so the mention hash is no larger than
// the membership hash). Each hash is read whole by one HRANDFIELD with a
// count above its size, which answers every field with its value in one
// walk of the hash (HKEYS and HVALS walked it twice, and at 10,000
// fields each walk cost twice as much per field as at 1,000: cache
// misses) and as pairs under RESP3 too (HGETALL's RESP3 map becomes a Go
// map in go-redis). A small user's three are read in one pipeline; a big
// user's (more fields than s.chunk) on three connections at once,
// so that one is decoded and sorted here while Redis answers the next.
// The tables are sorted, not maps: at 10,000 channels the maps' hashing
// and cache misses were a fifth of the call. The membership hash is read
// without its values when it counts no left register (its ":l" field,
// read with the sizes): every register in it then says "member", all
// this read needs of them, and its values were half the Redis time and
// a third of the strings decoded. A leave between the two round trips
// reads as if this read came just before it.
func (s Store) userHashes(ctx context.Context, user string) (*userHashes, error) {
	var ulen, mlen *redis.IntCmd
	var leftCount *redis.StringCmd
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		ulen = pipe.HLen(ctx, s.cursorStore().RedisKey(user))
		mlen = pipe.HLen(ctx, s.memberStore().UserMembersKey(user))
		leftCount = pipe.HGet(ctx, s.memberStore().UserMembersKey(user), members.LeftCountField)
	}); err != nil {
		return nil, err
	}
	// Each hash holds at most two marker fields.
	n := max(ulen.Val(), mlen.Val()) - 2
	if n > redisstore.MaxUnreadChannels {
		return nil, fmt.Errorf("%w: user %s has about %d (at most %d)", redisstore.ErrTooManyChannels, user, n, redisstore.MaxUnreadChannels)
	}
	keys := [3]string{s.cursorStore().RedisKey(user), s.memberStore().UserMembersKey(user), s.mentionStore().RedisKey(user)}
	membersOnly := leftCount.Val() == "0"
	// read sends (or queues, on a pipeline) the read of keys[i]; its
	// answer's table comes from the function it returns.
	read := func(c redis.Cmdable, i int) func() (fieldTable, error) {
		if i == 1 && membersOnly {
			cmd := c.HRandField(ctx, keys[i], redisstore.WholeHashCount)
			return func() (fieldTable, error) { return membersTable(user, cmd) }
		}
		cmd := c.HRandFieldWithValues(ctx, keys[i], redisstore.WholeHashCount)
		return func() (fieldTable, error) { return userTable(user, cmd) }
	}
	var tables [3]fieldTable
	var errs [3]error
	h := &userHashes{mentionsDone: make(chan struct{})}
	if n <= int64(s.chunk) {
		var answers [3]func() (fieldTable, error)
		if err := s.exec(ctx, func(pipe redis.Pipeliner) {
			for i := range keys {
				answers[i] = read(pipe, i)
			}
		}); err != nil {
			return nil, fmt.Errorf("reading the channels of %s: %w", user, err)
		}
		for i, answer := range answers {
			tables[i], errs[i] = answer()
		}
		h.mentions, h.mentionsErr = tables[2], errs[2]
		close(h.mentionsDone)
	} else {
		readOne := func(i int) { tables[i], errs[i] = read(s.redis.Client(), i)() }
		go func() {
			defer close(h.mentionsDone)
			readOne(2)
			h.mentions, h.mentionsErr = tables[2], errs[2]
		}()
		var wg sync.WaitGroup
		wg.Go(func() { readOne(1) })
		readOne(0)
		wg.Wait()
	}
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return nil, err
	}
	h.cursors, h.regs = tables[0], tables[1]
	return h, nil
}

// membersTable is a membership hash that counts no left register, read
// without its values, as a sorted table of members.
func membersTable(user string, cmd *redis.StringSliceCmd) (fieldTable, error) {
	t, err := keysTable(user, cmd)
	t.membersOnly = true
	return t, err
}

// userTable is one user hash's HRANDFIELD answer as a sorted table.
func userTable(user string, cmd *redis.KeyValueSliceCmd) (fieldTable, error) {
	kvs, err := cmd.Result()
	if err := userHashErr(user, len(kvs), err); err != nil {
		return fieldTable{}, err
	}
	return newFieldTable(kvs), nil
}

// userHashErr is the error of an HRANDFIELD of a user hash that answered
// n fields: a failed read, or more than a default channel set holds.
func userHashErr(user string, n int, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: reading the channels of %s: %w", redisstore.ErrUnavailable, user, err)
	case n >= redisstore.WholeHashCount:
		return fmt.Errorf("%w: user %s has more than %d", redisstore.ErrTooManyChannels, user, redisstore.MaxUnreadChannels)
	}
	return nil
}

// unionOf is the union of the channels of the cursors and the registers,
// in order, each once.
func unionOf(user string, cursors, regs fieldTable) ([]string, error) {
	cs, rs := cursors.entries, regs.entries
	channels := make([]string, 0, max(len(cs), len(rs)))
	for i, j := 0, 0; i < len(cs) || j < len(rs); {
		switch {
		case j == len(rs) || (i < len(cs) && cs[i].Key < rs[j].Key):
			channels = append(channels, cs[i].Key)
			i++
		case i == len(cs) || rs[j].Key < cs[i].Key:
			channels = append(channels, rs[j].Key)
			j++
		default:
			channels = append(channels, cs[i].Key)
			i, j = i+1, j+1
		}
	}
	if len(channels) > redisstore.MaxUnreadChannels {
		return nil, fmt.Errorf("%w: user %s has %d (at most %d)", redisstore.ErrTooManyChannels, user, len(channels), redisstore.MaxUnreadChannels)
	}
	return channels, nil
}

// pageOf keeps the channels of page: after page.After, not left (a
// register that says so), at most page.Limit; more reports whether any
// was cut. regs is read with a copy of its position.
func pageOf(channels []string, regs fieldTable, user string, page Page) (kept []string, more bool) {
	if page.After != "" {
		i, _ := slices.BinarySearch(channels, page.After)
		if i < len(channels) && channels[i] == page.After {
			i++
		}
		channels = channels[i:]
	}
	kept = channels[:0]
	for _, ch := range channels {
		// Only a register starting "0" can say "left": others skip decoding.
		if v, ok := regs.next(ch); ok && strings.HasPrefix(v, "0") {
			if m, err := members.DecodeRegister(receipt.Key{User: user, Channel: ch}, v); err == nil && !m.Member {
				continue
			}
		}
		if page.Limit > 0 && len(kept) == page.Limit {
			return kept, true
		}
		kept = append(kept, ch)
	}
	return kept, false
}

// fieldTable is a hash's fields (markers apart) and values, sorted by
// field, read in field order with next.
type fieldTable struct {
	entries []redis.KeyValue
	// loaded: the hash holds the ":loaded" marker.
	loaded bool
	// membersOnly: a membership hash read without its values, every
	// register in it a member's (membersTable).
	membersOnly bool
	at          int // next's position
}

// newFieldTable sorts a hash's fields and values in place, the markers
// taken out.
func newFieldTable(kvs []redis.KeyValue) fieldTable {
	t := fieldTable{}
	kept := kvs[:0]
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, ":") {
			t.loaded = t.loaded || kv.Key == redisstore.LoadedField
			continue
		}
		kept = append(kept, kv)
	}
	sortByKey(kept)
	t.entries = kept
	return t
}

// sortByKey sorts pairs by key. Each key's 6 bytes after the keys'
// common prefix (zero-padded, so that their order is the keys' order)
// and its index are packed in an integer, the integers sorted (an
// ordered sort, no comparison function, the integers side by side), and
// only keys whose 6 bytes are equal compared whole: comparing a user's
// channel ids as strings, with long shared prefixes and each a pointer
// into memory scattered by the reply's decoding, made the sorts of a
// 10,000-channel user's hashes a seventh of its call.
func sortByKey(kvs []redis.KeyValue) {
	if len(kvs) < 2 || len(kvs) > 1<<16 {
		slices.SortFunc(kvs, func(a, b redis.KeyValue) int { return strings.Compare(a.Key, b.Key) })
		return
	}
	first, lcp := kvs[0].Key, len(kvs[0].Key)
	for _, kv := range kvs[1:] {
		n := min(lcp, len(kv.Key))
		i := 0
		for i < n && kv.Key[i] == first[i] {
			i++
		}
		lcp = i
	}
	ks := make([]uint64, len(kvs))
	for i, kv := range kvs {
		var k uint64
		rest := kv.Key[lcp:]
		for j := range 6 {
			k <<= 8
			if j < len(rest) {
				k |= uint64(rest[j])
			}
		}
		ks[i] = k<<16 | uint64(i)
	}
	sortPackedKeys(ks)
	// Position i takes the pair at index ks[i]'s: the permutation's cycles
	// are followed in place (a sorted copy was, at 10,000 fields, 320 kB
	// of pointers to clear, scan and copy back).
	moved := make([]uint64, (len(kvs)+63)/64)
	for i := range kvs {
		if moved[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		first, j := kvs[i], i
		for {
			moved[j/64] |= 1 << (j % 64)
			from := int(ks[j] & 0xffff)
			if from == i {
				kvs[j] = first
				break
			}
			kvs[j], j = kvs[from], from
		}
	}
	// Runs of equal 6 bytes, in index order so far: sorted whole.
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j]>>16 == ks[i]>>16 {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(kvs[i:j], func(a, b redis.KeyValue) int { return strings.Compare(a.Key, b.Key) })
		}
		i = j
	}
}

// sortPackedKeys sorts sortByKey's integers, whose low 16 bits (the
// index) ascend: a stable radix sort of the six key bytes, a byte a pass,
// leaves them in integer order. A comparison sort mispredicts a branch
// in about every other comparison: with it and a sorted copy, sortByKey
// of 10,000 fields took twice as long (BenchmarkSortByKey).
func sortPackedKeys(ks []uint64) {
	if len(ks) < 256 {
		slices.Sort(ks)
		return
	}
	src, dst := ks, make([]uint64, len(ks))
	for shift := 16; shift < 64; shift += 8 {
		var at [256]int
		for _, k := range src {
			at[byte(k>>shift)]++
		}
		if at[byte(src[0]>>shift)] == len(src) {
			continue // one value of this byte: the pass would change nothing
		}
		pos := 0
		for d, n := range at {
			at[d], pos = pos, pos+n
		}
		for _, k := range src {
			d := byte(k >> shift)
			dst[at[d]] = k
			at[d]++
		}
		src, dst = dst, src
	}
	copy(ks, src)
}

// next returns the value of field f; the fields asked for must come in
// ascending order. Equality is tried first: mostly the field is the next
// one, often the same string (the union of the tables is made of their
// keys), and an ordered comparison of channel ids sharing long prefixes
// cost more than the rest of the lookup.
func (t *fieldTable) next(f string) (string, bool) {
	for ; t.at < len(t.entries); t.at++ {
		switch k := t.entries[t.at].Key; {
		case k == f:
			return t.entries[t.at].Value, true
		case k > f:
			return "", false
		}
	}
	return "", false
}

// from is t positioned at its first field at or after f (a part of the
// fields read on its own).
func (t fieldTable) from(f string) fieldTable {
	t.at, _ = slices.BinarySearchFunc(t.entries, f, func(kv redis.KeyValue, f string) int { return strings.Compare(kv.Key, f) })
	return t
}

// hmgetTable is an HMGET's answer for fields (ascending) and then the
// ":loaded" marker, as a table.
func hmgetTable(fields []string, vals []any) fieldTable {
	t := fieldTable{loaded: vals[len(fields)] != nil}
	for i, f := range fields {
		if v, ok := vals[i].(string); ok {
			t.entries = append(t.entries, redis.KeyValue{Key: f, Value: v})
		}
	}
	return t
}
