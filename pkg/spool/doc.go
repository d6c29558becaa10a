// Package spool is a local, append-only, fsynced and byte-bounded queue of
// opaque (key, value, headers) records with in-order replay. kafkagate appends the
// events Kafka did not acknowledge in time, answers the caller once Append
// returns (the records are then on disk), and a replayer drains the spool to
// Kafka in order when the broker is back, also after a crash.
//
// Layout: Dir holds numbered segment files (an 8-byte magic header, then
// frames [length u32][crc32c u32][key length u32][key][value], little
// endian; the CRC covers the length and the payload), a two-slot checkpoint
// file with the position of the oldest record not yet acknowledged by a
// reader, and a LOCK file that keeps a second process out. Format v2
// (magic spool\0v2, what new segments get) adds headers: a frame whose key
// length has its top bit set is [length][crc][key length | 1<<31][headers
// length u32][key][headers][value], the headers [name length u16][value
// length u16][name][value] each, at most MaxHeaders and MaxHeaderBytes
// (Append refuses more with ErrTooLarge; the reader takes a frame past
// them for damage). A record without headers keeps v1's frame, and v1
// segments (magic spool\0v1) are read as they are. A binary from before
// v2 takes a v2 segment's header and its frames with headers for damage:
// drain the spool before downgrading kafkagate.
//
// Guarantees:
//   - Append returns only after its frames are written and fsynced;
//     concurrent calls share one write and one fsync (group commit).
//   - The segment files stay within Config.MaxBytes: an Append that does
//     not fit fails whole with ErrFull and nothing of it is written, so the
//     gateway answers "retry" rather than dropping anything. (Only groups
//     that each start a segment while racing to the bound can pass it, by an
//     8-byte header each.)
//   - Records come out in append order (an Append that returned before
//     another began comes out first; one call's records stay together), and
//     a reader sees a batch again until it commits it (at-least-once: a crash
//     between sending and committing replays the batch).
//   - Open keeps every whole frame whose CRC matches: after a damaged frame
//     or segment header it resynchronises at the next valid frame, moves
//     the damaged bytes aside to the segment's .damaged file and reports
//     them in Recovery (DiscardedBytes). A crash can only tear bytes that
//     were never fsynced, so nothing acknowledged is lost; damage (a media
//     error, not a crash) costs the damaged frames only, never the frames
//     after them or later segments.
//
// The package knows nothing about receipts and imports only the standard
// library; callers log Recovery and export Stats as metrics.
package spool
