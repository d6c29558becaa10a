// Package receipt holds the domain primitives of the receipts system: the
// key of a cursor (user, channel), its position as a max-register (the
// public read ordered by (seq, epoch), the user's own read by (epoch, seq)),
// the merge rule every store applies, and the validation rules
// for ids and sequences. It imports nothing but the standard library.
package receipt
