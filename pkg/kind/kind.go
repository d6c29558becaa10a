package kind

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// Env is what a kind's statements run against: the two stores and the
// settings some merge rules take.
type Env struct {
	Postgres *pgstore.Store
	// Redis is nil where a caller works on Postgres alone.
	Redis *redisstore.Store
	// MentionCap is the mention retention (each key keeps its newest
	// cap+1 seqs): the one place a service gives it to the kinds, whose
	// Specs make their stores with it.
	MentionCap int
	// UpsertThreadStates, when set, writes the thread registers in place
	// of the plain upsert: the persister's change feed reads the thread
	// cursor moves it returns.
	UpsertThreadStates func(ctx context.Context, vals []thread.State) (int64, error)
	// SettingsApplied, when set, makes the views follow a user's settings
	// register that a write to Redis changed (the read-by view shows only
	// what a user shares: readby.Store.SettingsApplier); a kind never
	// imports a view, so the service that builds the Env hands it in.
	SettingsApplied func(ctx context.Context, st privacy.Settings) error
}

// MentionCapOrDefault is the mention retention: MentionCap, or
// channel.MentionCapDefault when unset.
func (e *Env) MentionCapOrDefault() int {
	if e != nil && e.MentionCap > 0 {
		return e.MentionCap
	}
	return channel.MentionCapDefault
}

// Spec describes one kind of state with keys K and values V: everything
// the generic loops need, each rule written once. Every function is
// required unless its comment says otherwise.
type Spec[K comparable, V any] struct {
	// Name is the kind's Postgres table; it labels reports and dead letters.
	Name string
	// Key is a value's key; Compare orders values by key as the Postgres
	// page walk does (statements write in that order, so they never
	// deadlock).
	Key     func(V) K
	Compare func(a, b V) int
	// RecordKey is the Kafka record key of the kind's events about k.
	RecordKey func(k K) string
	// User is the user whose erasure removes the value; nil for state
	// that belongs to no user (a channel's head).
	User func(K) string
	// Time is when the value was last accepted (ms; 0: it carries none).
	// An erasure drops what predates it, and the drift sweep leaves a
	// Redis value younger than its grace period alone (in flight).
	Time func(V) int64

	// Zero is the value a store holds when it holds nothing of k: the
	// identity of Merge. Empty reports a value that means nothing (a
	// Redis head of seq 0 caches "no head yet"): never drift.
	Zero  func(k K) V
	Empty func(V) bool
	// Merge is the kind's rule from the domain floor: commutative,
	// associative and idempotent, so stores that apply the same values in
	// any order, any number of times, converge. Same reports two values
	// the stores need not reconcile.
	Merge func(env *Env, a, b V) V
	Same  func(a, b V) bool
	// Rows is how many Postgres rows a value costs (nil: one).
	Rows func(V) int
	// Gather and Settle, when set, fold a persister window's values of
	// one key in linear time where a pairwise Merge would copy a growing
	// value per record (a set's union): Gather appends v to acc, a value
	// the window owns and may grow in place, and Settle brings the
	// gathered value to Merge's result once, before the window is read.
	// Settle(Gather(…Gather(Zero, v1)…, vn)) must equal Merge's fold of
	// v1…vn.
	Gather func(acc, v V) V
	Settle func(env *Env, acc V) V

	// FromEvent is the kind's part of a decoded record, if it carries one:
	// read from event.Decoded's fields, by the kinds pkg/event decodes. A
	// kind with a Payload of its own leaves it nil.
	FromEvent func(d *event.Decoded) (V, bool)
	// Payload is the kind's own record payload (payload.go): a kind added
	// after the envelope sets it instead of FromEvent.
	Payload *Payload[V]

	// PGWrite merges values into Postgres by Merge's rule (values are in
	// key order, at most one per key). PGGet returns the rows of keys
	// that have one; PGPage up to n rows after `after` in key order
	// (hasAfter false: from the start).
	PGWrite func(ctx context.Context, env *Env, vals []V) (int64, error)
	PGGet   func(ctx context.Context, env *Env, keys []K) ([]V, error)
	PGPage  func(ctx context.Context, env *Env, after K, hasAfter bool, n int) ([]V, error)
	// PGTrim, when set, applies the kind's retention to the keys of vals
	// after a write. It only bounds the table (readers apply the
	// retention themselves), so a failure is logged, never dead-lettered.
	PGTrim func(ctx context.Context, env *Env, vals []V) (int64, error)

	// RedisWrite merges values into Redis by the same rule; errs, when not
	// nil, holds one error per value (nil: merged). RedisGet returns, per
	// key, every copy Redis keeps of it (nil: that copy is absent): one
	// for most kinds, two for a membership register (the user's hash and
	// the channel's). RedisScan returns one SCAN page of the values Redis
	// holds, how many ids it scanned and how many values fail validation
	// (never copied).
	RedisWrite func(ctx context.Context, env *Env, vals []V) (errs []error, err error)
	RedisGet   func(ctx context.Context, env *Env, keys []K) ([][]*V, error)
	RedisScan  func(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) (ScanPage[V], error)

	// Scripts, when set, are the kind's Redis scripts, loaded with the
	// store's (redisstore.Store.Load); the kind's pipelines name them to
	// redisstore.Store.Exec, which loads them again when Redis lost them.
	Scripts []*redis.Script
	// ErasedHashes, when set, names the user's Redis hashes of the kind
	// that an erasure leaves empty and complete (":loaded"), so a read
	// never falls back to Postgres rows not deleted yet: keys in the
	// user's slot (a {user} hash tag), reset by the script that raises
	// the tombstone (redisstore.Store.Erase).
	ErasedHashes func(env *Env, user string) []string
	// ErasedNameChannels says the fields of ErasedHashes start with a
	// channel id (up to a space): the erasure cleans those channels as it
	// cleans those of the user's cursors (redisstore.ErasedHash.Channels).
	ErasedNameChannels bool
	// ErasedCounters, when set, are marker fields an erasure keeps at "0"
	// in each of ErasedHashes: counts of the hash's fields the kind's
	// scripts keep only in a hash made with them (the membership hash's
	// count of left registers; redisstore.ErasedHash.Counters).
	ErasedCounters []string
	// DeletedHashes, when set, names the user's Redis hashes of the kind
	// that an erasure deletes and leaves absent: a kind whose read of an
	// absent hash reads Postgres, where the erasure deletes the rows too
	// (keys in the user's slot, deleted by the same script).
	DeletedHashes func(env *Env, user string) []string
	// PGErase, when set, is the statement deleting the user's rows from
	// the kind's table (Name; $1: the user id), run in the transaction
	// that raises the tombstone (pgstore.Store.Erase).
	PGErase string
	// PGChannels, when set, is the statement answering the channels the
	// user's rows of the kind name (channel_id; $1: the user id), read in
	// that transaction before any delete: the channels the redactions
	// ($2 of PGRedact) clean.
	PGChannels string
	// PGRedact, when set, is the statement redacting the user where the
	// kind's rows name them but are not theirs ($1: the user id, $2: the
	// channels the user had state in: every kind's PGChannels), run after
	// the deletes of the same transaction (pgstore.Erasure's Redacts); PGRedacted names
	// the columns it redacts ("table.column"), which the erasure's
	// coverage test accepts as naming a user (kinds.RedactedColumns).
	PGRedact   string
	PGRedacted []string
	// RedisRedact, when set, redacts user in channel ch's Redis keys of
	// the kind where they name the user but are not theirs, as an erasure
	// cleans each channel the user had state in (redisstore.Redact, handed
	// to redisstore.Store.Erase and FinishErasures by kind.RedisRedact).
	RedisRedact func(ctx context.Context, env *Env, user, ch string) error

	// Digests, when set, has the drift sweep compare the stores' digests
	// of the kind's values and read whole only the keys whose digests
	// differ: for values that are large sets.
	Digests *Digests[K]
}

// ScanPage is one SCAN page of a kind's values in Redis.
type ScanPage[V any] struct {
	Values  []V
	Scanned int // ids (users, channels, keys) the page named
	Invalid int // values that fail validation
	Next    redisstore.ScanCursor
}
