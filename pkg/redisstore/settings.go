package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
)

// A user's privacy settings live in us:{user}, field "s", as
// "R D VERSION_MS" (R, D "1" share or "0" not; decimal version), then
// " L" when the default notification level L is set, merged by
// privacy.Merge: the greater version, on a tie the one sharing less, then
// the greater (quieter) level.

const settingsField = "s"

// defaultsTTL is how long the defaults read from Postgres for a user who
// never set anything stay cached.
const defaultsTTL = time.Hour

// SettingsKey is a user's settings hash.
func (s *Store) SettingsKey(user string) string { return s.prefix + "us:{" + user + "}" }

func encodeSettings(st privacy.Settings) string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	v := b(st.ShareRead) + " " + b(st.ShareDelivered) + " " + strconv.FormatInt(st.VersionMs, 10)
	if st.DefaultLevel != notification.Unset {
		v += " " + strconv.Itoa(int(st.DefaultLevel))
	}
	return v
}

func decodeSettings(user, v string) (privacy.Settings, error) {
	f := strings.Fields(v)
	if len(f) != 3 && len(f) != 4 {
		return privacy.Settings{}, fmt.Errorf("settings of %s: %q: want 3 or 4 fields", user, v)
	}
	ver, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return privacy.Settings{}, fmt.Errorf("settings of %s: %q: %w", user, v, err)
	}
	st := privacy.Settings{User: user, ShareRead: f[0] == "1", ShareDelivered: f[1] == "1", VersionMs: ver}
	if len(f) == 4 {
		l, err := strconv.Atoi(f[3])
		if err != nil || !notification.Level(l).Valid() {
			return privacy.Settings{}, fmt.Errorf("settings of %s: %q: bad level", user, v)
		}
		st.DefaultLevel = notification.Level(l)
	}
	return st, nil
}

// settingsScript merges a settings register. KEYS[1] = us hash, KEYS[2]
// (optional) = the user's tombstone; ARGV[1] = "R D V", ARGV[2] = the TTL
// (ms) of a defaults entry, ARGV[3] (optional) = "1": a change, whose
// version V the script sets to Redis' clock (TIME, in ms), or one more
// than the stored version when that is not less, so that the change
// always wins over what it read and no gateway's clock orders it.
// Returns {changed, stored value}, then with KEYS[2] the user's erasure
// generation (decimal, "-1": GenerationUnknown), read in the script that
// writes, so the event stamped with it is ordered against an erasure as
// its Redis write is (as mergeScript).
var settingsScript = redis.NewScript(luaViewCmp + `
local cur = redis.call('HGET', KEYS[1], 's')
local inc = ARGV[1]
local b = {} for p in string.gmatch(inc, "[^ ]+") do b[#b+1] = p end
local a = {}
if cur then for p in string.gmatch(cur, "[^ ]+") do a[#a+1] = p end end
if ARGV[3] == "1" then
  local t = redis.call('TIME')
  local v = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if cur then
    local sv = tonumber(a[3])
    if sv and sv >= v then v = sv + 1 end
  end
  b[3] = string.format("%d", v)
  inc = table.concat(b, " ")
elseif cur then
  local c = cmp(b[3], a[3])
  -- a tie: the one sharing less ("0" before "1") wins, then the quieter
  -- default level (an absent level is 0)
  if c == 0 then if b[1] ~= a[1] then if b[1] == "0" then c = 1 else c = -1 end end end
  if c == 0 then if b[2] ~= a[2] then if b[2] == "0" then c = 1 else c = -1 end end end
  if c == 0 then c = cmp(b[4] or "0", a[4] or "0") end
  if c <= 0 then
    if KEYS[2] then return {0, cur, redis.call('HGET', KEYS[2], 'g') or "-1"} end
    return {0, cur}
  end
end
redis.call('HSET', KEYS[1], 's', inc)
if b[3] == "0" then
  -- the defaults, cached after a Postgres read: expire, so only active
  -- users keep a key; a real setting (version > 0) never expires
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PERSIST', KEYS[1])
end
if KEYS[2] then return {1, inc, redis.call('HGET', KEYS[2], 'g') or "-1"} end
return {1, inc}
`)

// MergeSettings merges settings registers in one pipeline and returns the
// stored settings after each.
func (s *Store) MergeSettings(ctx context.Context, sts []privacy.Settings) ([]privacy.Settings, error) {
	cmds := make([]*redis.Cmd, len(sts))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, st := range sts {
			cmds[i] = settingsScript.EvalSha(ctx, pipe, []string{s.SettingsKey(st.User)}, encodeSettings(st), defaultsTTL.Milliseconds())
		}
	}); err != nil {
		return nil, err
	}
	out := make([]privacy.Settings, len(sts))
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil || len(res) != 2 {
			return nil, fmt.Errorf("%w: merging settings of %s: %w", ErrUnavailable, sts[i].User, err)
		}
		v, _ := res[1].(string)
		if out[i], err = decodeSettings(sts[i].User, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ChangeSettings stores a user's new settings (st's version is replaced:
// settingsScript) and returns them as stored, with the user's erasure
// generation read in the same script (GenerationUnknown: Redis holds no
// tombstone) for the gateway to stamp on the event.
func (s *Store) ChangeSettings(ctx context.Context, st privacy.Settings) (privacy.Settings, int64, error) {
	res, err := settingsScript.Run(ctx, s.rdb, []string{s.SettingsKey(st.User), s.TombstoneKey(st.User)},
		encodeSettings(st), defaultsTTL.Milliseconds(), "1").Slice()
	if err != nil || len(res) != 3 {
		return privacy.Settings{}, 0, fmt.Errorf("%w: changing the settings of %s: %w", ErrUnavailable, st.User, err)
	}
	v, _ := res[1].(string)
	stored, err := decodeSettings(st.User, v)
	if err != nil {
		return privacy.Settings{}, 0, err
	}
	g, _ := res[2].(string)
	gen, err := parseGeneration(g)
	return stored, gen, err
}

// Settings reads users' settings in one pipeline; found[i] is false when
// Redis holds none for users[i] (never set, or lost: read Postgres and
// MergeSettings what it says, defaults included).
func (s *Store) Settings(ctx context.Context, users []string) (sts []privacy.Settings, found []bool, err error) {
	cmds := make([]*redis.StringCmd, len(users))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.HGet(ctx, s.SettingsKey(u), settingsField)
		}
	}); err != nil {
		return nil, nil, err
	}
	sts, found = make([]privacy.Settings, len(users)), make([]bool, len(users))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			sts[i] = privacy.Default(users[i])
		case err != nil:
			return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		default:
			if sts[i], err = decodeSettings(users[i], v); err != nil {
				return nil, nil, err
			}
			found[i] = true
		}
	}
	return sts, found, nil
}

// SettingsProbe is a user's settings read queued on a pipeline another
// read sends (the badge's levels ride the unread read's), saving its
// round trip.
type SettingsProbe struct {
	user string
	cmd  *redis.StringCmd
}

// QueueSettings queues the read of user's settings on pipe.
func (s *Store) QueueSettings(ctx context.Context, pipe redis.Pipeliner, user string) SettingsProbe {
	return SettingsProbe{user: user, cmd: pipe.HGet(ctx, s.SettingsKey(user), settingsField)}
}

// Result is what the probe read, as Settings answers: the defaults and
// found false when Redis holds none.
func (p SettingsProbe) Result() (st privacy.Settings, found bool, err error) {
	v, err := p.cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return privacy.Default(p.user), false, nil
	case err != nil:
		return privacy.Settings{}, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if st, err = decodeSettings(p.user, v); err != nil {
		return privacy.Settings{}, false, err
	}
	return st, true, nil
}

// ApplySettingsToViews makes the channel views of st's user follow st: the
// kinds not shared leave the views of every channel the user has cursors
// in, the kinds shared are (re)applied from the user's public cursors in
// Redis (a max-merge, streamed when it moves a watcher's view; ≤ 0 uses
// the default stream bound). The gateway runs it after a settings change,
// the repairs after a settings repair that changed Redis.
func (s *Store) ApplySettingsToViews(ctx context.Context, st privacy.Settings, streamMaxLen int64) error {
	states, _, err := s.Get(ctx, st.User, nil)
	if err != nil {
		return err
	}
	var hide []ViewKind
	if !st.ShareRead {
		hide = append(hide, ViewRead)
	}
	if !st.ShareDelivered {
		hide = append(hide, ViewDelivered)
	}
	var moves []ViewMove
	for _, c := range states {
		if len(hide) > 0 {
			if err := s.RemoveFromView(ctx, c.Key.Channel, []string{st.User}, hide...); err != nil {
				return err
			}
		}
		if st.ShareRead && !c.Read.Position.IsZero() {
			moves = append(moves, ViewMove{Channel: c.Key.Channel, User: st.User, Kind: ViewRead, Position: c.Read.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
		if st.ShareDelivered && !c.Delivered.Position.IsZero() {
			moves = append(moves, ViewMove{Channel: c.Key.Channel, User: st.User, Kind: ViewDelivered, Position: c.Delivered.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
	}
	_, err = s.ApplyViewMoves(ctx, moves, streamMaxLen)
	return err
}

// ScanSettingsUsers returns one SCAN page of the users with a settings
// hash and the cursor of the next page.
func (s *Store) ScanSettingsUsers(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "us:", cur, count)
	return onlyWhole(ids, rests), next, err
}
