package receipt

// MergeRegister merges a versioned register of one (user, channel): the
// greater by Compare wins whole (a later version replaces every field),
// under the stored key (the incoming one's when nothing was stored). It
// reports whether the incoming register won. key points into a register.
func MergeRegister[R interface{ Compare(R) int }](stored, incoming R, key func(*R) *Key) (R, bool) {
	k := *key(&stored)
	if k == (Key{}) {
		k = *key(&incoming)
	}
	if incoming.Compare(stored) > 0 {
		*key(&incoming) = k
		return incoming, true
	}
	*key(&stored) = k
	return stored, false
}
