package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// A user's notification registers live in one hash per user:
//
//	nl:{user}   hash: channel → "LEVEL MUTED_UNTIL_MS VERSION_MS"
//	            (decimal); ":loaded" once hydrated from Postgres, so a
//	            read that finds it trusts the hash whole
//
// merged by notification.Merge: the greater (version, level, muted until).

// UserNotificationsKey is a user's notification hash.
func (s *Store) UserNotificationsKey(user string) string { return s.prefix + "nl:{" + user + "}" }

func encodeNotifications(r notification.Register) string {
	return strconv.Itoa(int(r.Level)) + " " + strconv.FormatInt(r.MutedUntilUnixMs, 10) + " " + strconv.FormatInt(r.VersionUnixMs, 10)
}

func decodeNotifications(k receipt.Key, v string) (notification.Register, error) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return notification.Register{}, fmt.Errorf("notifications of %s: %q: want 3 fields", k.KafkaKey(), v)
	}
	l, err1 := strconv.Atoi(f[0])
	m, err2 := strconv.ParseInt(f[1], 10, 64)
	ver, err3 := strconv.ParseInt(f[2], 10, 64)
	r := notification.Register{Key: k, Level: notification.Level(l), MutedUntilUnixMs: m, VersionUnixMs: ver}
	if err1 != nil || err2 != nil || err3 != nil || r.Validate() != nil {
		return notification.Register{}, fmt.Errorf("notifications of %s: %q: invalid", k.KafkaKey(), v)
	}
	return r, nil
}

// luaNotifications compares two registers field by field as
// notification.Register.Compare does (cmp orders decimal strings).
const luaNotifications = `
local function nreg(v)
  local t = {}
  for p in string.gmatch(v, "[^ ]+") do t[#t+1] = p end
  return t
end
local function ncmp(a, b)
  local c = cmp(a[3], b[3]) if c ~= 0 then return c end
  c = cmp(a[1], b[1]) if c ~= 0 then return c end
  return cmp(a[2], b[2])
end
`

// mergeNotificationsScript merges registers into a user's hash. KEYS[1] =
// nl hash; ARGV = mark ("1": set ":loaded" after), the TTL (ms) of a hash
// that holds ":loaded" alone, then channel, register pairs. Returns, per
// pair, {changed, register}. A hash of a user who set nothing only caches
// "none" and expires, so only active users keep one; a register in it
// never expires.
var mergeNotificationsScript = redis.NewScript(luaViewCmp + luaNotifications + `
local out = {}
for i = 3, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur and ncmp(nreg(ARGV[i+1]), nreg(cur)) <= 0 then
    out[#out+1] = 0 out[#out+1] = cur
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1])
    out[#out+1] = 1 out[#out+1] = ARGV[i+1]
  end
end
if ARGV[1] == "1" then redis.call('HSET', KEYS[1], ':loaded', '1') end
if redis.call('HLEN', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], ':loaded') == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PERSIST', KEYS[1])
end
return out
`)

// changeNotificationsScript writes a user's change with a version from
// Redis' clock (TIME, in ms), or one more than the stored version when
// that is not less, so the change always wins over what it read and no
// gateway's clock orders two changes. KEYS[1] = nl hash, KEYS[2] = the
// user's tombstone; ARGV = channel, "LEVEL MUTED_UNTIL_MS". Returns {1,
// register, the user's erasure generation (as userMemberScript)}.
var changeNotificationsScript = redis.NewScript(luaViewCmp + luaNotifications + `
local t = redis.call('TIME')
local v = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local sv = tonumber(nreg(cur)[3])
  if sv and sv >= v then v = sv + 1 end
end
local reg = ARGV[2] .. " " .. string.format("%d", v)
redis.call('HSET', KEYS[1], ARGV[1], reg)
redis.call('PERSIST', KEYS[1])
return {1, reg, redis.call('HGET', KEYS[2], 'g') or "-1"}
`)

var notificationScripts = []*redis.Script{mergeNotificationsScript, changeNotificationsScript}

// NotificationsResult is the outcome of one register's merge or change.
type NotificationsResult struct {
	// Register is the user's register after the write.
	Register notification.Register
	Changed  bool
	// Generation is the user's erasure generation the change's script
	// read (ChangeNotifications only).
	Generation int64
	Err        error
}

// MergeNotifications merges registers into their users' hashes in one
// pipeline.
func (s *Store) MergeNotifications(ctx context.Context, regs []notification.Register) ([]NotificationsResult, error) {
	out := make([]NotificationsResult, len(regs))
	cmds := make([]*redis.Cmd, len(regs))
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, r := range regs {
			cmds[i] = mergeNotificationsScript.EvalSha(ctx, pipe, []string{s.UserNotificationsKey(r.Key.User)}, "0", defaultsTTL.Milliseconds(), r.Key.Channel, encodeNotifications(r))
		}
	})
	for i := range regs {
		res, rerr := cmds[i].Slice()
		if rerr != nil || len(res) != 2 {
			out[i].Err = fmt.Errorf("%w: merging the notifications of %s: %w", ErrUnavailable, regs[i].Key.KafkaKey(), rerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _ := res[1].(string)
		out[i].Register, out[i].Err = decodeNotifications(regs[i].Key, v)
		out[i].Changed = changed == 1
	}
	return out, err
}

// ChangeNotifications writes a user's change of level and mute; Redis
// sets its version (changeNotificationsScript).
func (s *Store) ChangeNotifications(ctx context.Context, r notification.Register) NotificationsResult {
	out := NotificationsResult{Register: r}
	arg := strconv.Itoa(int(r.Level)) + " " + strconv.FormatInt(r.MutedUntilUnixMs, 10)
	res, err := changeNotificationsScript.Run(ctx, s.rdb, []string{s.UserNotificationsKey(r.Key.User), s.TombstoneKey(r.Key.User)}, r.Key.Channel, arg).Slice()
	if err != nil || len(res) != 3 {
		out.Err = fmt.Errorf("%w: changing the notifications of %s: %w", ErrUnavailable, r.Key.KafkaKey(), err)
		return out
	}
	v, _ := res[1].(string)
	if out.Register, out.Err = decodeNotifications(r.Key, v); out.Err != nil {
		return out
	}
	g, _ := res[2].(string)
	out.Generation, out.Err = parseGeneration(g)
	out.Changed = out.Err == nil
	return out
}

// Notifications returns a user's registers by channel, of all channels
// (more than MaxUnreadChannels: ErrTooManyChannels) or the listed ones,
// and whether the hash is complete (hydrated): without it, absent
// registers are unknown, not unset.
func (s *Store) Notifications(ctx context.Context, user string, channels []string) (map[string]notification.Register, bool, error) {
	key := s.UserNotificationsKey(user)
	out := make(map[string]notification.Register)
	if len(channels) == 0 {
		n, err := s.rdb.HLen(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if n > MaxUnreadChannels+1 {
			return nil, false, fmt.Errorf("notifications of %s: %d registers: %w", user, n, ErrTooManyChannels)
		}
		m, err := s.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		_, complete := m[loadedField]
		for ch, v := range m {
			if strings.HasPrefix(ch, ":") {
				continue
			}
			if r, err := decodeNotifications(receipt.Key{User: user, Channel: ch}, v); err == nil {
				out[ch] = r
			} else {
				s.skipUndecodable()
			}
		}
		return out, complete, nil
	}
	vals, err := s.rdb.HMGet(ctx, key, append([]string{loadedField}, channels...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if r, err := decodeNotifications(receipt.Key{User: user, Channel: channels[i]}, str); err == nil {
			out[channels[i]] = r
		} else {
			s.skipUndecodable()
		}
	}
	return out, vals[0] != nil, nil
}

// Levels is what a user's badge needs of the notification state, read in
// one pipelined round trip.
type Levels struct {
	// Settings holds the default level; SettingsFound is false when Redis
	// holds no settings (read Postgres, as Settings' callers do).
	Settings      privacy.Settings
	SettingsFound bool
	// Registers are the listed channels' registers Redis holds; Complete
	// says the hash is hydrated, so an absent one is unset.
	Registers map[string]notification.Register
	Complete  bool
}

// LevelsOf reads a user's settings and the registers of the listed
// channels (at least one) in one pipeline.
func (s *Store) LevelsOf(ctx context.Context, user string, channels []string) (Levels, error) {
	var probe levelsProbe
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		probe = s.queueLevels(ctx, pipe, user, channels, false)
	}); err != nil {
		return Levels{}, err
	}
	return probe.result(s)
}

// levelsProbe is LevelsOf queued on a pipeline that another read sends
// (the unread read's), saving its round trip.
type levelsProbe struct {
	user     string
	channels []string
	settings *redis.StringCmd
	regs     *redis.SliceCmd
	// whole is the user's hash read whole, in place of regs.
	whole *redis.KeyValueSliceCmd
}

// levelsWholeFrom is how many channels make queueLevels read the user's
// notification hash whole when it may: a user sets levels in few of many
// channels, and an HMGET of a thousand fields mostly answering nil cost
// more than the hash.
const levelsWholeFrom = 64

// queueLevels queues LevelsOf's reads; mayReadWhole lets it read the whole
// hash for many channels (its answer then fails for a hash over
// MaxUnreadChannels: read LevelsOf).
func (s *Store) queueLevels(ctx context.Context, pipe redis.Pipeliner, user string, channels []string, mayReadWhole bool) levelsProbe {
	p := levelsProbe{user: user, channels: channels, settings: pipe.HGet(ctx, s.SettingsKey(user), settingsField)}
	if mayReadWhole && len(channels) >= levelsWholeFrom {
		p.whole = pipe.HRandFieldWithValues(ctx, s.UserNotificationsKey(user), userHashesCount)
	} else {
		p.regs = pipe.HMGet(ctx, s.UserNotificationsKey(user), append([]string{loadedField}, channels...)...)
	}
	return p
}

// readBy is the probe's answer, nil when it failed (the caller reads
// LevelsOf then).
func (p levelsProbe) readBy(s *Store) *Levels {
	l, err := p.result(s)
	if err != nil {
		return nil
	}
	return &l
}

func (p levelsProbe) result(s *Store) (Levels, error) {
	out := Levels{Settings: privacy.Default(p.user), Registers: make(map[string]notification.Register)}
	v, err := p.settings.Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return Levels{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	default:
		if out.Settings, err = decodeSettings(p.user, v); err != nil {
			return Levels{}, err
		}
		out.SettingsFound = true
	}
	if p.whole != nil {
		return p.wholeResult(s, out)
	}
	vals, err := p.regs.Result()
	if err != nil {
		return Levels{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out.Complete = vals[0] != nil
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if r, err := decodeNotifications(receipt.Key{User: p.user, Channel: p.channels[i]}, str); err == nil {
			out.Registers[p.channels[i]] = r
		} else {
			s.skipUndecodable()
		}
	}
	return out, nil
}

// wholeResult is result from the hash read whole: the registers of every
// channel it holds (a caller looks its channels up).
func (p levelsProbe) wholeResult(s *Store, out Levels) (Levels, error) {
	kvs, err := p.whole.Result()
	switch {
	case err != nil:
		return Levels{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case len(kvs) >= userHashesCount:
		return Levels{}, fmt.Errorf("%w: user %s has more than %d notification registers", ErrTooManyChannels, p.user, MaxUnreadChannels)
	}
	for _, kv := range kvs {
		if kv.Key == loadedField {
			out.Complete = true
			continue
		}
		if strings.HasPrefix(kv.Key, ":") {
			continue // a marker
		}
		if r, err := decodeNotifications(receipt.Key{User: p.user, Channel: kv.Key}, kv.Value); err == nil {
			out.Registers[kv.Key] = r
		} else {
			s.skipUndecodable()
		}
	}
	return out, nil
}

// NotificationsOf returns each key's register (nil where absent) in one
// pipelined round trip: the drift sweep's lookup of a page.
func (s *Store) NotificationsOf(ctx context.Context, keys []receipt.Key) ([]*notification.Register, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.UserNotificationsKey(k.User), k.Channel)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]*notification.Register, len(keys))
	err := s.readEach(cmds, func(i int, v string) error {
		r, err := decodeNotifications(keys[i], v)
		if err == nil {
			out[i] = &r
		}
		return err
	})
	return out, err
}

// HydrateNotifications merges a user's durable registers (from Postgres)
// and marks the hash complete, in chunks of memberChunk. Every write is a
// merge: a change written meanwhile wins.
func (s *Store) HydrateNotifications(ctx context.Context, user string, regs []notification.Register) error {
	for start := 0; ; start += memberChunk {
		end := min(start+memberChunk, len(regs))
		mark := "0"
		if end == len(regs) {
			mark = "1"
		}
		argv := []any{mark, defaultsTTL.Milliseconds()}
		for _, r := range regs[start:end] {
			argv = append(argv, r.Key.Channel, encodeNotifications(r))
		}
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			mergeNotificationsScript.EvalSha(ctx, pipe, []string{s.UserNotificationsKey(user)}, argv...)
		}); err != nil {
			return fmt.Errorf("hydrating the notifications of %s: %w", user, err)
		}
		if end == len(regs) {
			return nil
		}
	}
}

// ScanNotificationUsers returns one SCAN page of the users with a
// notification hash and the cursor of the next page.
func (s *Store) ScanNotificationUsers(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "nl:", cur, count)
	return onlyWhole(ids, rests), next, err
}
