package seam

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
)

// Group commit: concurrent calls' marks share one Redis pipeline and one
// produce batch. A call that finds a free flush slot flushes at once with
// whatever is queued (so an idle gate adds no wait); calls arriving while
// every slot is busy queue, and the next flush takes them all (up to a
// batch bound). Single marks then share round trips instead of each paying
// its own Redis write and produce request.
//
// A flush has two stages: the Redis stage (checks and merge), which holds
// the flush slot, and the Kafka stage (waiting for the acks), which does
// not: the flush hands its slot off once its records are encoded, so the
// next flush's Redis stage overlaps this one's produce, and kgo sends
// the records of overlapping flushes together. Slots no longer split the
// waiting calls in two to keep Redis and Kafka busy at once; a bounded
// number of flushes (Produces) may wait on Kafka.

// Coalescer defaults.
const (
	// CoalesceMaxMarksDefault bounds the marks of one flush: one Redis
	// pipeline and one produce batch.
	CoalesceMaxMarksDefault = 2000
	// CoalesceMaxQueuedDefault bounds the marks waiting for a flush; a call
	// that does not fit is answered Unavailable (nothing written).
	CoalesceMaxQueuedDefault = 50000
	// CoalesceFlushesDefault is the number of flushes in their Redis
	// stage at once.
	CoalesceFlushesDefault = 1
	// CoalesceProducesDefault bounds the flushes past their Redis stage,
	// waiting for Kafka's acks (the producer's requests in flight,
	// producer.ProduceInflightDefault, send them).
	CoalesceProducesDefault = 5
)

// CoalesceConfig bounds the group commit.
type CoalesceConfig struct {
	// MaxMarks bounds the marks of one flush (a larger call goes alone).
	// Defaults to CoalesceMaxMarksDefault.
	MaxMarks int
	// MaxQueued bounds the marks waiting for a flush. Defaults to
	// CoalesceMaxQueuedDefault.
	MaxQueued int
	// Flushes is the number of flushes in their Redis stage at once; 1
	// serialises the merges. Defaults to CoalesceFlushesDefault.
	Flushes int
	// Produces bounds the flushes past their Redis stage, waiting for
	// Kafka: a flush that finds them all busy keeps its slot until one
	// ends. Defaults to CoalesceProducesDefault.
	Produces int
}

// RegisterFlags registers the group commit's flags.
func (c *CoalesceConfig) RegisterFlags(fs *flag.FlagSet) {
	*c = c.withDefaults()
	fs.IntVar(&c.MaxMarks, "write-batch-max", c.MaxMarks, "most marks of concurrent calls written together (one Redis pipeline, one produce batch)")
	fs.IntVar(&c.MaxQueued, "write-queue-max", c.MaxQueued, "most marks waiting to be written; a call beyond it is answered Unavailable")
	fs.IntVar(&c.Flushes, "write-flushes", c.Flushes, "shared writes in their Redis stage (checks, merge) at once")
	fs.IntVar(&c.Produces, "write-produces", c.Produces, "shared writes past their Redis stage waiting for Kafka at once")
}

func (c CoalesceConfig) withDefaults() CoalesceConfig {
	c.MaxMarks = cmp.Or(c.MaxMarks, CoalesceMaxMarksDefault)
	c.MaxQueued = cmp.Or(c.MaxQueued, CoalesceMaxQueuedDefault)
	c.Flushes = cmp.Or(c.Flushes, CoalesceFlushesDefault)
	c.Produces = cmp.Or(c.Produces, CoalesceProducesDefault)
	return c
}

func (c CoalesceConfig) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"Coalesce.MaxMarks", c.MaxMarks}, {"Coalesce.MaxQueued", c.MaxQueued}, {"Coalesce.Flushes", c.Flushes}, {"Coalesce.Produces", c.Produces}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s: must be >= 1, got %d", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}
