package receipt

import (
	"errors"
	"strings"
)

// Key identifies one cursor pair: a user in a channel.
type Key struct {
	User    string
	Channel string
}

// Compare orders keys by user then channel: -1, 0 or +1 as k is before,
// equal to or after o.
func (k Key) Compare(o Key) int {
	if c := strings.Compare(k.User, o.User); c != 0 {
		return c
	}
	return strings.Compare(k.Channel, o.Channel)
}

// CompareStates orders states by key (for slices.SortFunc).
func CompareStates(a, b State) int { return a.Key.Compare(b.Key) }

// Less orders keys by user then channel, the order rows are written in
// (key order inserts about twice as fast as random order in Postgres).
func (k Key) Less(o Key) bool {
	if k.User != o.User {
		return k.User < o.User
	}
	return k.Channel < o.Channel
}

// Position is a cursor's place: a seq and the read epoch it was written at.
// Epoch is 0 until an explicit mark-unread bumps it. The user's own read
// position is ordered by (Epoch, Seq) (Compare), so a stale read of an
// older epoch loses to a mark-unread; the public read cursor others see is
// ordered by (Seq, Epoch) (CompareBySeq), so it never moves back.
type Position struct {
	Epoch int64
	Seq   int64
}

// Compare returns -1, 0 or +1 as p is before, equal to or after o in
// (Epoch, Seq) order.
func (p Position) Compare(o Position) int {
	switch {
	case p.Epoch < o.Epoch:
		return -1
	case p.Epoch > o.Epoch:
		return 1
	case p.Seq < o.Seq:
		return -1
	case p.Seq > o.Seq:
		return 1
	}
	return 0
}

// CompareBySeq returns -1, 0 or +1 as p is before, equal to or after o in
// (Seq, Epoch) order: the public read cursor's.
func (p Position) CompareBySeq(o Position) int {
	switch {
	case p.Seq < o.Seq:
		return -1
	case p.Seq > o.Seq:
		return 1
	}
	return cmpInt(p.Epoch, o.Epoch)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IsZero reports whether the position carries no information.
func (p Position) IsZero() bool { return p == Position{} }

// Cursor is a position with the id of the message at it. The message id
// always travels with its position, so a merge never pairs an id with the
// wrong seq.
type Cursor struct {
	Position  Position
	MessageID string
}

// MaxCursor returns the greater cursor in (Epoch, Seq) order; on a tie it
// keeps a, so a merge of equal positions is a no-op.
func MaxCursor(a, b Cursor) Cursor {
	if b.Position.Compare(a.Position) > 0 {
		return b
	}
	return a
}

// MaxCursorBySeq returns the greater cursor in (Seq, Epoch) order (the
// public read's); on a tie it keeps a.
func MaxCursorBySeq(a, b Cursor) Cursor {
	if b.Position.CompareBySeq(a.Position) > 0 {
		return b
	}
	return a
}

// EpochCurrent is the epoch of an incoming mark's read or private read
// cursor that asks the real-time store to resolve it to the stored read epoch
// (see redisstore); it never reaches Kafka or Postgres, and Merge treats
// it as lower than every stored epoch.
const EpochCurrent int64 = -1

// State is everything stored for one key.
type State struct {
	Key Key
	// Read is the public read cursor others see (read-by, ticks, watch
	// streams): the greatest read by (Seq, Epoch), so it never moves back.
	Read Cursor
	// PrivateRead is the user's own read position, which others never see:
	// the greatest by (Epoch, Seq) of every read, private read and
	// mark-unread merged. The user's counts use the (Epoch, Seq)-greater of
	// Read and PrivateRead (EffectiveRead), so a mark-unread, which moves
	// only PrivateRead to the next epoch, shows below the public seq. It
	// is kept only while it is ahead of Read (Merge drops it otherwise),
	// and the stores keep its position only, not its message id.
	PrivateRead Cursor
	Delivered   Cursor
	// DeviceID is the device of the latest mark that advanced a cursor.
	DeviceID string
	// UpdatedAtUnixMs is when a cursor last advanced.
	UpdatedAtUnixMs int64
}

// EffectiveRead is the position the user's own counts derive from: the
// (Epoch, Seq)-greater of the public and the private read cursor.
func (s State) EffectiveRead() Position {
	return MaxCursor(s.Read, s.PrivateRead).Position
}

// ReadEpoch is the current read epoch: the greater of both read cursors'.
// A mark without an epoch applies at it; mark-unread moves to the next.
func (s State) ReadEpoch() int64 { return max(s.Read.Position.Epoch, s.PrivateRead.Position.Epoch) }

// Canonical drops a private read cursor that is not ahead of the public
// one in (Epoch, Seq) order (the user's own position is then the public
// one), so that equal states compare equal whatever the order their
// cursors arrived in.
func (s State) Canonical() State {
	if s.PrivateRead.Position.Compare(s.Read.Position) <= 0 {
		s.PrivateRead = Cursor{}
	}
	return s
}

// raiseDelivered applies "reading implies delivery" by seq: a read at seq
// N shows that every message up to N was delivered, whatever its epoch.
// Delivered keeps its own epoch — there is no mark-undelivered, so it
// stays 0 — and takes the read's seq and message id when they are ahead.
func raiseDelivered(delivered, read Cursor) Cursor {
	if read.Position.Seq > delivered.Position.Seq {
		return Cursor{Position: Position{Epoch: delivered.Position.Epoch, Seq: read.Position.Seq}, MessageID: read.MessageID}
	}
	return delivered
}

// Merge applies the max-register rule field-wise on two registers: the
// public read is the greater of both by (Seq, Epoch), so others never see
// it move back; the user's own position (EffectiveRead) is the greater by
// (Epoch, Seq) of every read and private read of both sides, kept as
// PrivateRead while it is ahead of the public read; delivered is the
// greater, raised to the seq of every read seen (reading implies
// delivery, by seq: see raiseDelivered); the device and time follow
// whichever side moved a cursor forward. Both registers are plain maxima
// (PrivateRead is a function of them), so Merge is idempotent,
// commutative and associative on the cursors (given that delivered epochs
// agree, as they do: they are always 0), which is what makes duplicates,
// reordering and replays harmless. It returns the merged state and
// whether any cursor moved.
func Merge(stored, incoming State) (State, bool) {
	stored = stored.Canonical()
	out := stored
	out.Key = incoming.Key
	if stored.Key != (Key{}) {
		out.Key = stored.Key
	}
	out.Read = MaxCursorBySeq(stored.Read, incoming.Read)
	// The own position must include both reads: the public one alone no
	// longer holds the (Epoch, Seq)-greatest read once it is ordered by seq.
	// A read's message id stays with the public cursor.
	out.PrivateRead = MaxCursor(MaxCursor(Cursor{Position: stored.Read.Position}, stored.PrivateRead),
		MaxCursor(Cursor{Position: incoming.Read.Position}, incoming.PrivateRead))
	out.Delivered = MaxCursor(stored.Delivered, incoming.Delivered)
	// A read that did not win (a stale one) still proved delivery. The
	// private read does not: delivered is shown to others.
	out.Delivered = raiseDelivered(out.Delivered, incoming.Read)
	out.Delivered = raiseDelivered(out.Delivered, stored.Read)
	out = out.Canonical()
	moved := !out.SameCursors(stored)
	if moved {
		out.DeviceID = incoming.DeviceID
		out.UpdatedAtUnixMs = max(stored.UpdatedAtUnixMs, incoming.UpdatedAtUnixMs)
	}
	return out, moved
}

// MarkUnread is the incoming state of a mark-unread from seq (the first
// unread message) by a client that saw the read epoch seenEpoch: the
// user's private read moves to seq-1 at epoch seenEpoch+1, so a read of
// an older epoch arriving later loses in the user's own view, while a read
// at the new epoch advances it again. The public read cursor and
// delivered do not move. The same call repeated (same seq, same
// seenEpoch) is the same register value, so it changes nothing twice.
func MarkUnread(k Key, seq, seenEpoch int64) State {
	return State{
		Key:         k,
		PrivateRead: Cursor{Position: Position{Epoch: seenEpoch + 1, Seq: seq - 1}},
	}
}

// Covers reports whether s holds at least the cursors of o: the check behind
// the "no lost acknowledged write" invariant.
func (s State) Covers(o State) bool {
	return s.Read.Position.CompareBySeq(o.Read.Position) >= 0 &&
		s.Delivered.Position.Compare(o.Delivered.Position) >= 0 &&
		s.EffectiveRead().Compare(o.EffectiveRead()) >= 0
}

// SameCursors reports whether both states hold the same positions (the
// private read compared in canonical form).
func (s State) SameCursors(o State) bool {
	a, b := s.Canonical(), o.Canonical()
	return a.Read.Position == b.Read.Position && a.Delivered.Position == b.Delivered.Position &&
		a.PrivateRead.Position == b.PrivateRead.Position
}

// MaxEpoch bounds every read epoch. Only mark-unread moves an epoch
// forward, one step a call, so the bound is never reached by use; it keeps
// a client-chosen epoch, and the step after it, inside every store's
// numbers: int64 in Go and Postgres (CHECK constraints), base-62 numerals
// of at most six digits and exact doubles in Redis' Lua.
const MaxEpoch int64 = 1<<31 - 1

// ErrEpochLimit is the failure of a mark-unread on a cursor already at
// MaxEpoch.
var ErrEpochLimit = errors.New("the read epoch is at its limit; mark-unread cannot move it further")

// EpochAhead reports whether a mark's explicit read or private read epoch
// is ahead of the stored read epoch. A client may send an epoch it saw
// (the stored one or an older one, which makes the mark stale); only
// mark-unread moves the epoch forward, so an epoch ahead of the stored one
// would let a client move its own read position back without one. The
// gateway refuses such a mark whole; an epoch of EpochCurrent is never
// ahead.
func EpochAhead(stored, mark State) bool {
	e := stored.Canonical().ReadEpoch()
	return !mark.Read.Position.IsZero() && mark.Read.Position.Epoch > e ||
		!mark.PrivateRead.Position.IsZero() && mark.PrivateRead.Position.Epoch > e
}

// CanMarkUnread reports whether a mark-unread that saw seenEpoch may move
// the read epoch to the next one: not when it is at MaxEpoch already.
func CanMarkUnread(seenEpoch int64) bool { return seenEpoch < MaxEpoch }
