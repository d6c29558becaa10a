package grouplag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A Fence is a topic's end offsets at one moment: every record produced
// before it was taken sits below it. Once a consumer group has committed
// at or past a fence on every partition, the group's sink holds every
// such record (the persister commits only after its database commit).
type Fence map[int32]int64

// MarkFence reads the topic's end offsets now.
func MarkFence(ctx context.Context, adm *kadm.Client, topic string) (Fence, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if len(ends[topic]) == 0 {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	f := make(Fence, len(ends[topic]))
	for p, o := range ends[topic] {
		f[p] = o.Offset
	}
	return f, nil
}

// Committed reads group's committed offsets on topic, and each
// partition's start offset where the group has none (nothing below the
// start can still be in flight: retention deleted it).
func Committed(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("fetching offsets of group %s: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64, len(starts[topic]))
	for p, s := range starts[topic] {
		at := s.Offset
		if c, ok := commits.Lookup(topic, p); ok && c.Err == nil && c.At > at {
			at = c.At
		}
		out[p] = at
	}
	return out, nil
}

// PassedBy reports whether positions (Committed's answer) are at or past
// f on every partition of f.
func (f Fence) PassedBy(positions map[int32]int64) bool {
	for p, end := range f {
		if positions[p] < end {
			return false
		}
	}
	return true
}

// Behind is how many records of f positions have not reached, summed.
func (f Fence) Behind(positions map[int32]int64) int64 {
	var n int64
	for p, end := range f {
		n += max(0, end-positions[p])
	}
	return n
}

// String encodes f as "partition:offset" pairs, comma-separated, in
// partition order ("" for an empty fence).
func (f Fence) String() string {
	ps := make([]int32, 0, len(f))
	for p := range f {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(p), 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(f[p], 10))
	}
	return b.String()
}

// maxFencePartitions bounds a decoded fence: Kafka topics have at most a
// few thousand partitions in practice; a value past this is not ours.
const maxFencePartitions = 1 << 16

// ParseFence decodes String's encoding.
func ParseFence(s string) (Fence, error) {
	f := Fence{}
	if s == "" {
		return f, nil
	}
	for pair := range strings.SplitSeq(s, ",") {
		ps, os, ok := strings.Cut(pair, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("decoding a fence: bad pair %q", pair)
		}
		f[int32(p)] = o
		if len(f) > maxFencePartitions {
			return nil, fmt.Errorf("decoding a fence: more than %d partitions", maxFencePartitions)
		}
	}
	return f, nil
}
