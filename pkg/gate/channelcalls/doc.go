// Package channelcalls answers what upstream tells of a channel: message
// notices (the head, the sender's read, mentions and group mentions; a
// reply notice is the thread calls'), deletions, joins and leaves
// (through the write step, seam.WriteUser), and GetChannel.
package channelcalls
