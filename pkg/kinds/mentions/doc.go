// Package mentions is the seqs of the messages that mention a user in a
// channel, kept to the newest cap+1, a kind of state that owns its
// storage: the fifth kind in a folder of its own. The rule is the domain
// floor's (channel.MergeMentions, a union kept to the newest cap+1);
// here are its Spec (spec.go, listed by the registry pkg/kinds), its
// Postgres statements (the .sql files, run by postgres.go), its Redis
// layout and script (redis.go, add.lua), its part of an erasure
// (erase.sql and the Spec's ErasedHashes: the hash is left empty and
// complete) and the tests of all of them. Store is the typed face the
// gateway calls: it adds a notice's mentions (stamping each with the
// erasure generation its script read), reads them from Postgres and
// hydrates Redis from them beside the memberships.
//
// Its bounds are where its values enter, in the domain floor: at most
// channel.MaxMentionSeqs seqs per event (channel.ValidateMentionSeqs, run
// by pkg/event's decode), each > 0 (also the table's CHECK); the
// retention cap is the deployment's, given once to a Store
// (WithMentionCap; the Spec's store takes kind.Env's).
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified, redisstore.Store's Exec, Client, Prefix, TombstoneKey,
// PadSeq, ParsePadded, ReadEach and LoadedField), which name none of it.
// The unread view (pkg/views/unread) reads the user's hash (RedisKey)
// with the user's cursors and registers in one round trip and decodes
// only the seqs above a read (AppendSeqList). An erasure also deletes the
// sorted sets of the layout before this one (mn:{user}:<channel>), which
// the driver's Erase still finds itself. Its Kafka codec is still
// pkg/event's.
package mentions
