package members

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A membership register lives twice in Redis, per user and per channel.
// Every key carries a hash tag, {user} or {channel}, so Redis Cluster
// keeps what one script touches in one slot:
//
//	um:{user}            hash: channel → the membership register
//	                     "M VERSION_SEQ VERSION_MS JOIN_SEQ" (M 1 or 0,
//	                     numbers base 62); ":loaded" once hydrated; ":l"
//	                     → how many registers say "left", kept by the
//	                     scripts in a hash made with it (an older build's
//	                     hash has none), so a user who left nothing is
//	                     read without values
//	cm:{channel}         hash: user → the same register; ":n" → the
//	                     joined-member count, kept by the script on every
//	                     member/non-member transition (in the same key as
//	                     the registers it counts, so it can never be lost
//	                     or evicted apart from them); ":loaded" once
//	                     hydrated
//
// A user's mentions are a kind's of their own (pkg/kinds/mentions).
// The two copies are two slots in a cluster, so two scripts, both
// max-merges; a failure of one is repaired by the drift sweep. Field
// names starting with ':' are markers no id can equal (an id may hold
// ':', never first: receipt.ValidateID).

const (
	// userTag and channelTag start the keys of the two hashes (after the
	// store's prefix).
	userTag    = "um:"
	channelTag = "cm:"
	countField = ":n"
	// LeftCountField counts a membership hash's left registers
	// (UserMembersKey): "0" says every register in it is a member's.
	LeftCountField = ":l"
	// memberChunk bounds the registers of one hydrate script call.
	memberChunk = 256
)

// UserMembersKey is a user's membership hash.
func (s Store) UserMembersKey(user string) string {
	return s.redis.Prefix() + userTag + "{" + user + "}"
}

// ChannelMembersKey is a channel's membership hash.
func (s Store) ChannelMembersKey(ch string) string {
	return s.redis.Prefix() + channelTag + "{" + ch + "}"
}

var (
	//go:embed register.lua
	luaRegister string
	//go:embed usermerge.lua
	luaUserMerge string
	//go:embed change.lua
	luaChange string
	//go:embed channelmerge.lua
	luaChannelMerge string
	//go:embed erasechannel.lua
	luaEraseChannel string

	// userMemberScript merges registers into a user's membership hash.
	// KEYS[1] = um hash, KEYS[2] (optional) = the user's tombstone; ARGV =
	// mark ("1": set ":loaded" after), then channel, register pairs. Returns,
	// per pair, {changed, register}, then with KEYS[2] the user's erasure
	// generation (decimal, "-1": GenerationUnknown), read in the script that
	// writes, so the event stamped with it is ordered against an erasure as
	// its Redis write is (as the cursors' merge script).
	userMemberScript = redis.NewScript(redisstore.LuaCommon + luaRegister + luaUserMerge)

	// changeMemberScript writes a join or leave into a user's membership
	// hash with a version Redis orders: the proposed version seq (the head)
	// and, as version time, Redis' clock (TIME, in ms) — or, when that does
	// not order after the register stored, the stored version seq and one
	// more than its time. So a change always wins over what it read, and no
	// gateway's clock decides a join/leave race. KEYS[1] = um hash, KEYS[2] =
	// the user's tombstone; ARGV = channel, the proposed register (its version
	// time is replaced). Returns {1, register, the user's erasure generation
	// (as userMemberScript)}.
	changeMemberScript = redis.NewScript(redisstore.LuaCommon + luaRegister + luaChange)

	// channelMemberScript merges registers into a channel's membership hash,
	// keeping the member count. KEYS[1] = cm hash; ARGV as userMemberScript,
	// user ids for channels. Returns, per pair, {changed, register}, then
	// the member count.
	channelMemberScript = redis.NewScript(redisstore.LuaCommon + luaRegister + luaChannelMerge)

	// eraseChannelScript removes a user's membership register from a
	// channel (keeping the member count). KEYS = cm; ARGV[1] = the user.
	// The kind's part of an erasure in each channel (EraseChannel).
	eraseChannelScript = redis.NewScript(luaEraseChannel)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{userMemberScript, changeMemberScript, channelMemberScript, eraseChannelScript}
)

// MembershipResult is the outcome of one register merge.
type MembershipResult struct {
	// Membership is the user's register after the merge (the user's hash).
	Membership channel.Membership
	// Changed is true when the merge replaced the register.
	Changed bool
	// MemberCount is the channel's joined-member count after the merge,
	// as its hash holds it (exact once the hash is hydrated).
	MemberCount int64
	// Generation is the user's erasure generation read in the script that
	// merged the user's register: the gateway stamps it on the event.
	Generation int64
	Err        error
}

// MergeMemberships merges registers into both membership hashes (the
// user's and the channel's, which keeps the member count) in one pipeline.
func (s Store) MergeMemberships(ctx context.Context, regs []channel.Membership) ([]MembershipResult, error) {
	out := make([]MembershipResult, len(regs))
	um := make([]*redis.Cmd, len(regs))
	cm := make([]*redis.Cmd, len(regs))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, m := range regs {
			v, err := encodeRegister(m)
			if err != nil {
				out[i].Err = err
				continue
			}
			um[i] = userMemberScript.EvalSha(ctx, pipe, []string{s.UserMembersKey(m.Key.User), s.redis.TombstoneKey(m.Key.User)}, "0", m.Key.Channel, v)
			cm[i] = channelMemberScript.EvalSha(ctx, pipe, []string{s.ChannelMembersKey(m.Key.Channel)}, "0", m.Key.User, v)
		}
	}, Scripts...)
	for i := range regs {
		if um[i] == nil {
			continue
		}
		res, uerr := um[i].Slice()
		cres, cerr := cm[i].Slice()
		if uerr != nil || cerr != nil {
			out[i].Err = fmt.Errorf("%w: merging the membership of %s: %w", redisstore.ErrUnavailable, regs[i].Key.KafkaKey(), errors.Join(uerr, cerr))
			continue
		}
		changed, _ := res[0].(int64)
		v, _ := res[1].(string)
		out[i].Membership, out[i].Err = DecodeRegister(regs[i].Key, v)
		out[i].Changed = changed == 1
		if len(res) >= 3 {
			g, _ := res[2].(string)
			if gen, gerr := redisstore.ParseGeneration(g); gerr != nil {
				out[i].Err = gerr
			} else {
				out[i].Generation = gen
			}
		}
		out[i].MemberCount, _ = cres[len(cres)-1].(int64)
	}
	return out, err
}

// ChangeMembership writes a join or leave: into the user's hash first,
// where Redis sets its version (changeMemberScript), then the register
// so versioned into the channel's hash (another slot in a cluster: a
// failure there is repaired by the drift sweep, as MergeMemberships').
// Membership is the register as versioned by Redis once the user's hash
// took it (even when the channel's failed), else m.
func (s Store) ChangeMembership(ctx context.Context, m channel.Membership) MembershipResult {
	out := MembershipResult{Membership: m}
	v, err := encodeRegister(m)
	if err != nil {
		out.Err = err
		return out
	}
	rdb := s.redis.Client()
	res, err := changeMemberScript.Run(ctx, rdb, []string{s.UserMembersKey(m.Key.User), s.redis.TombstoneKey(m.Key.User)}, m.Key.Channel, v).Slice()
	if err != nil || len(res) != 3 {
		out.Err = fmt.Errorf("%w: changing the membership of %s: %w", redisstore.ErrUnavailable, m.Key.KafkaKey(), err)
		return out
	}
	v, _ = res[1].(string)
	versioned, err := DecodeRegister(m.Key, v)
	if err != nil {
		out.Err = err
		return out
	}
	out.Membership = versioned
	g, _ := res[2].(string)
	if out.Generation, out.Err = redisstore.ParseGeneration(g); out.Err != nil {
		return out
	}
	out.Changed = true
	cres, err := channelMemberScript.Run(ctx, rdb, []string{s.ChannelMembersKey(m.Key.Channel)}, "0", m.Key.User, v).Slice()
	if err != nil {
		out.Err = fmt.Errorf("%w: changing the membership of %s in the channel's hash: %w", redisstore.ErrUnavailable, m.Key.KafkaKey(), err)
		return out
	}
	out.MemberCount, _ = cres[len(cres)-1].(int64)
	return out
}

// Memberships returns a user's registers in the listed channels (all when
// empty) and whether the hash is complete (hydrated, mentions included).
func (s Store) Memberships(ctx context.Context, user string, channels []string) ([]channel.Membership, bool, error) {
	return s.registers(ctx, s.UserMembersKey(user), channels, func(field string) receipt.Key {
		return receipt.Key{User: user, Channel: field}
	})
}

// ChannelMembers returns a channel's registers of the listed users (all
// when empty: bounded by the channel's size) and whether the hash is
// complete (MemberCount has the count).
func (s Store) ChannelMembers(ctx context.Context, ch string, users []string) ([]channel.Membership, bool, error) {
	return s.registers(ctx, s.ChannelMembersKey(ch), users, func(field string) receipt.Key {
		return receipt.Key{User: field, Channel: ch}
	})
}

// RegistersOf returns, for each key, its register in the user's hash and
// in the channel's hash (nil where absent), in one pipelined round trip:
// the drift sweep's lookup of a page.
func (s Store) RegistersOf(ctx context.Context, keys []receipt.Key) (byUser, byChannel []*channel.Membership, err error) {
	ucmds := make([]*redis.StringCmd, len(keys))
	ccmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			ucmds[i] = pipe.HGet(ctx, s.UserMembersKey(k.User), k.Channel)
			ccmds[i] = pipe.HGet(ctx, s.ChannelMembersKey(k.Channel), k.User)
		}
	}); err != nil {
		return nil, nil, err
	}
	read := func(cmds []*redis.StringCmd) ([]*channel.Membership, error) {
		out := make([]*channel.Membership, len(cmds))
		err := s.redis.ReadEach(cmds, func(i int, v string) error {
			m, err := DecodeRegister(keys[i], v)
			if err == nil {
				out[i] = &m
			}
			return err
		})
		return out, err
	}
	if byUser, err = read(ucmds); err != nil {
		return nil, nil, err
	}
	byChannel, err = read(ccmds)
	return byUser, byChannel, err
}

// MemberCount returns a channel's joined-member count and whether its
// membership hash is complete (otherwise the count covers only the
// registers merged since it was lost: hydrate first).
func (s Store) MemberCount(ctx context.Context, ch string) (int64, bool, error) {
	vals, err := s.redis.Client().HMGet(ctx, s.ChannelMembersKey(ch), countField, redisstore.LoadedField).Result()
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	var n int64
	if v, ok := vals[0].(string); ok {
		n, _ = strconv.ParseInt(v, 10, 64)
	}
	return n, vals[1] != nil, nil
}

func (s Store) registers(ctx context.Context, key string, fields []string, keyOf func(string) receipt.Key) ([]channel.Membership, bool, error) {
	var out []channel.Membership
	rdb := s.redis.Client()
	if len(fields) == 0 {
		m, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		_, complete := m[redisstore.LoadedField]
		for f, v := range m {
			if strings.HasPrefix(f, ":") {
				continue
			}
			r, err := DecodeRegister(keyOf(f), v)
			if err != nil {
				return nil, false, err
			}
			out = append(out, r)
		}
		return out, complete, nil
	}
	vals, err := rdb.HMGet(ctx, key, append([]string{redisstore.LoadedField}, fields...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		r, err := DecodeRegister(keyOf(fields[i]), str)
		if err != nil {
			return nil, false, err
		}
		out = append(out, r)
	}
	return out, vals[0] != nil, nil
}

// HydrateMemberships merges a user's durable registers and then marks
// the user's membership hash complete, so that reads trust it. Every
// write is a merge: a newer value written meanwhile wins. A complete
// view needs the user's mentions hydrated too (pkg/kinds/mentions).
func (s Store) HydrateMemberships(ctx context.Context, user string, regs []channel.Membership) error {
	for start := 0; start < len(regs); start += memberChunk {
		if err := s.mergeRegisters(ctx, userMemberScript, s.UserMembersKey(user), regs[start:min(start+memberChunk, len(regs))], false,
			func(m channel.Membership) string { return m.Key.Channel }); err != nil {
			return fmt.Errorf("hydrating the memberships of %s: %w", user, err)
		}
	}
	// The script, not an HSET: a hash it makes counts its left registers.
	if err := userMemberScript.Run(ctx, s.redis.Client(), []string{s.UserMembersKey(user)}, "1").Err(); err != nil {
		return fmt.Errorf("%w: marking the memberships of %s complete: %w", redisstore.ErrUnavailable, user, err)
	}
	return nil
}

// HydrateChannelMembers merges a page of a channel's durable registers
// (the member count follows), and with last marks the hash complete: call
// it for every page of the channel, the last one with last.
func (s Store) HydrateChannelMembers(ctx context.Context, ch string, regs []channel.Membership, last bool) error {
	for start := 0; ; start += memberChunk {
		end := min(start+memberChunk, len(regs))
		if err := s.mergeRegisters(ctx, channelMemberScript, s.ChannelMembersKey(ch), regs[start:end], last && end == len(regs),
			func(m channel.Membership) string { return m.Key.User }); err != nil {
			return fmt.Errorf("hydrating the members of %s: %w", ch, err)
		}
		if end == len(regs) {
			return nil
		}
	}
}

func (s Store) mergeRegisters(ctx context.Context, sc *redis.Script, key string, regs []channel.Membership, mark bool, field func(channel.Membership) string) error {
	flag := "0"
	if mark {
		flag = "1"
	}
	argv := []any{flag}
	for _, m := range regs {
		v, err := encodeRegister(m)
		if err != nil {
			return err
		}
		argv = append(argv, field(m), v)
	}
	if len(argv) == 1 && !mark {
		return nil
	}
	if err := sc.Run(ctx, s.redis.Client(), []string{key}, argv...).Err(); err != nil {
		return fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	return nil
}

// ScanMembershipUsers returns one SCAN page of the users with a membership
// hash and the cursor of the next page.
func (s Store) ScanMembershipUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, userTag, cur, count)
}

// UntrackedChannels reports which of channels Redis knows to have no
// membership registers at all (their membership hash is complete and
// holds none): their read-by views stay empty (pkg/views/readby's apply
// script), so the gateway need not build their moves. Read after a
// merge, it is safe to act on: a join registers its member before it
// publishes the cursors the member holds, which include the merge.
func (s Store) UntrackedChannels(ctx context.Context, channels []string) (map[string]bool, error) {
	type probe struct {
		markers *redis.SliceCmd
		size    *redis.IntCmd
	}
	probes := make([]probe, len(channels))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cm := s.ChannelMembersKey(ch)
			probes[i] = probe{pipe.HMGet(ctx, cm, redisstore.LoadedField, countField), pipe.HLen(ctx, cm)}
		}
	}); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(channels))
	for i, ch := range channels {
		markers, err := probes[i].markers.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
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

// EraseChannel removes user's register from channel ch's membership hash
// (keeping the member count): the kind's part of an erasure in each
// channel the user had state in (Spec.RedisRedact), which runs before
// the views clean the channel (pkg/views/readby's Redact).
func (s Store) EraseChannel(ctx context.Context, user, ch string) error {
	if err := eraseChannelScript.Run(ctx, s.redis.Client(), []string{s.ChannelMembersKey(ch)}, user).Err(); err != nil {
		return fmt.Errorf("%w: erasing %s from channel %s: %w", redisstore.ErrUnavailable, user, ch, err)
	}
	return nil
}
