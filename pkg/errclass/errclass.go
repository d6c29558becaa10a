// Package errclass names the classes every store and client sorts its
// errors into, so that services route on the class (retry, dead-letter,
// alert) and never on a driver's error text. Each store classifies its own
// errors in one function: pgstore.Classify, redisstore.Classify,
// kafkaconf.Classify.
package errclass

// Class is what an error means for the caller.
type Class int

// The classes.
const (
	// None: no error.
	None Class = iota
	// Unavailable: the dependency could not do it now (unreachable, timed
	// out, restarting, failing over, overloaded). Retrying later can
	// succeed.
	Unavailable
	// Rejected: the dependency refused this data (a constraint, a record
	// it will never take). Retrying the same data cannot succeed; it
	// belongs on the dead-letter topic.
	Rejected
	// Permanent: the dependency answered with an error that repeating will
	// not fix and that is not the data's fault (credentials, a missing
	// table, a script bug). An operator must act.
	Permanent
	// Canceled: our own caller gave up (context canceled) or the client
	// was closed; nothing is wrong with the dependency.
	Canceled
)

func (c Class) String() string {
	switch c {
	case None:
		return "none"
	case Unavailable:
		return "unavailable"
	case Rejected:
		return "rejected"
	case Permanent:
		return "permanent"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}
