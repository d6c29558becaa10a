// Package redisstore is the real-time view in Redis (go-redis/v9): one hash
// per user whose fields are channels, keys carrying a {user} hash tag so a
// user's keys share a Redis Cluster slot, a configurable key prefix, and Lua
// scripts, loaded once and run by SHA, that merge with the max rule so a
// write or a repopulate can never move a cursor backwards.
package redisstore
