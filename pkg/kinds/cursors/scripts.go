package cursors

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/redisstore"
)

var (
	//go:embed value.lua
	luaValue string
	//go:embed merge.lua
	luaMerge string
	//go:embed hydrate.lua
	luaHydrate string
	//go:embed mergemany.lua
	luaMergeMany string
	//go:embed markunread.lua
	luaMarkUnread string
	//go:embed cas.lua
	luaCAS string
)

// value.lua is the Lua of a cursor value (codec.go): parse, enc, epoch
// and merge, which merges one encoded state into a user's hash. The
// caller encodes the incoming value canonically (encodeValue), so a
// stored value equal to it is a duplicate and an empty field just takes
// it; only otherwise are both parsed and merged with the max rule. A
// stored value in the v1 layout is converted on the way (its decimal
// numbers to base 62, exactly: two limbs below 2^53) and rewritten only
// if the merge advances. Every script starts with the driver's LuaCommon
// (cmp, cmppos, b62), then value.lua.

// mergeScript merges one channel's state into a user's hash.
// KEYS[1] = user hash, KEYS[2] (optional) = the user's tombstone; ARGV =
// channel, encoded value (encodeValue or encodeMark), strict ("1": refuse
// a stale explicit epoch), and what an empty field takes (encodeValue of
// the value resolved at epoch 0). Returns {changed (0/1), merged value in
// either layout ("" = no state), the stored read epoch the incoming "-"
// epochs resolved to, stale (0/1), then with KEYS[2] the user's erasure
// generation (decimal, "0" when known never erased, "-1" when Redis holds
// no tombstone hash: GenerationUnknown)}; a plain merge (strict "0")
// without KEYS[2] may leave out all but the first two. The generation is
// read in the same script as the merge, so the event the gateway stamps
// with it is ordered against an erasure (eraseScript) exactly as its
// Redis write is.
var mergeScript = redis.NewScript(redisstore.LuaCommon + luaValue + luaMerge)

// hydrateScript merges many channels of one user at once and then marks the
// hash complete (field ":loaded", which no channel id can equal), so later
// reads trust the hash alone. KEYS[1] = user hash, KEYS[2] = the user's
// fence (UserFenceKey), KEYS[3] (optional) = the incarnation marker the
// restore waited for; ARGV[1] = the user fence the restore waited for
// ("" none), ARGV[2] with KEYS[3] its generation, then channel, value
// pairs, as for mergeScript (never strict). Returns 0, having changed
// nothing, when the user's fence is no longer that one (the user was
// unloaded after a degraded write since the restore read Postgres) or the
// marker is no longer of that generation (Redis lost data again).
var hydrateScript = redis.NewScript(redisstore.LuaCommon + redisstore.LuaIntact + luaValue + luaHydrate)

// mergeManyScript is hydrateScript without the completeness marker.
var mergeManyScript = redis.NewScript(redisstore.LuaCommon + luaValue + luaMergeMany)

// markUnreadScript moves a user's private read in a channel to seq-1 at
// the epoch after the one the client saw (receipt.MarkUnread); the public
// read does not move. KEYS[1] = user hash, KEYS[2] (optional) = the user's
// tombstone; ARGV = channel, seq-1 (base 62), device, time (base 62),
// receipt.MaxEpoch (base 62), the epoch the client saw (base 62; "" for
// the stored read epoch). Returns mergeScript's answer, its epoch being
// the one seen (a retry passes it to change nothing twice), with KEYS[2]
// the user's erasure generation read in the same script (as mergeScript);
// stale 2 when the epoch seen is ahead of the stored one
// (receipt.EpochAhead), stale 3 when it is at receipt.MaxEpoch, stale 4
// when the user's hash is not loaded (nothing changed in any case).
var markUnreadScript = redis.NewScript(redisstore.LuaCommon + luaValue + luaMarkUnread)

// casScript writes fields only where they still hold the expected value,
// for many keys in one call (of one cluster slot). KEYS = pairs of a user
// hash and that user's tombstone; ARGV = field, expected value ("" for
// none), new value, per pair. Returns per pair: 1 and the generation when
// written, 2 when the user's hash is not loaded (Redis lost it, never
// restored it, or it was unloaded after a degraded write: nothing is
// written, whatever the field holds), else 0, the generation and the
// current value ("" none). The generation is "-1" when Redis holds no
// tombstone hash for the user (GenerationUnknown). The
// generation is read in the same script as the write, so the event stamped
// with it is ordered against an erasure exactly as its Redis write is.
var casScript = redis.NewScript(luaCAS)

// scripts are the kind's scripts, registered with the driver so that
// every Load (after Redis lost its script cache) loads them.
var scripts = redisstore.Register(mergeScript, hydrateScript, mergeManyScript, markUnreadScript, casScript)
