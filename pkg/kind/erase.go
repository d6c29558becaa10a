package kind

// A user's erasure is applied by the drivers in one step each (a Redis
// script, a Postgres transaction) that also raises the tombstone; the
// kinds that own their storage add their part to it here, so the
// drivers name none of them.

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Scripts are the Redis scripts of ks, for redisstore.Store.Load.
func Scripts(ks []Kind) []*redis.Script {
	var out []*redis.Script
	for _, k := range ks {
		out = append(out, k.Scripts()...)
	}
	return out
}

// ErasedHashes are the hashes of user that an erasure clears for the
// kinds ks, left empty and complete (Spec.ErasedHashes) or deleted
// (Spec.DeletedHashes): redisstore.Store.Erase's kindHashes.
func ErasedHashes(ks []Kind, env *Env, user string) []redisstore.ErasedHash {
	var out []redisstore.ErasedHash
	for _, k := range ks {
		for _, h := range k.ErasedHashes(env, user) {
			out = append(out, redisstore.ErasedHash{Key: h, Complete: true, Channels: k.ErasedNameChannels(), Counters: k.ErasedCounters()})
		}
		for _, h := range k.DeletedHashes(env, user) {
			out = append(out, redisstore.ErasedHash{Key: h})
		}
	}
	return out
}

// PGErasure is the kinds ks' part of an erasure in Postgres: what finds
// the user's channels, deletes the user's rows and redacts the user in
// rows not theirs (pgstore.Store.Erase).
func PGErasure(ks []Kind) pgstore.Erasure {
	var e pgstore.Erasure
	for _, k := range ks {
		if stmt := k.PGChannels(); stmt != "" {
			e.Channels = append(e.Channels, stmt)
		}
		if stmt := k.PGErase(); stmt != "" {
			e.Deletes = append(e.Deletes, stmt)
		}
		if stmt := k.PGRedact(); stmt != "" {
			e.Redacts = append(e.Redacts, stmt)
		}
	}
	return e
}

// RedisRedact is the kinds ks' redaction of a user in a channel's Redis
// keys: redisstore.Store.Erase's and FinishErasures' redact.
func RedisRedact(ks []Kind, env *Env) redisstore.Redact {
	return func(ctx context.Context, user, ch string) error {
		for _, k := range ks {
			if err := k.RedactRedis(ctx, env, user, ch); err != nil {
				return err
			}
		}
		return nil
	}
}
