package event

// EncodeLegacy builds a record as the builds before the envelope wrote
// it, for the tests of reading the earlier format.
var EncodeLegacy = encodeLegacy
