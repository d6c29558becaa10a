package grouplag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLag is one partition's position of a consumer group.
type PartitionLag struct {
	Partition int32 `json:"partition"`
	// Committed is the group's committed offset, -1 when it has none (then
	// the lag counts from the partition's start).
	Committed int64 `json:"committed"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	Lag       int64 `json:"lag"`
}

// TopicLag is a consumer group's lag on one topic.
type TopicLag struct {
	Group      string         `json:"group"`
	Topic      string         `json:"topic"`
	Partitions []PartitionLag `json:"partitions"`
	Total      int64          `json:"total"`
}

func (l TopicLag) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group %s on %s: total lag %d\n", l.Group, l.Topic, l.Total)
	fmt.Fprintf(&b, "%9s %12s %12s %12s %10s\n", "partition", "start", "committed", "end", "lag")
	for _, p := range l.Partitions {
		fmt.Fprintf(&b, "%9d %12d %12d %12d %10d\n", p.Partition, p.Start, p.Committed, p.End, p.Lag)
	}
	return b.String()
}

// ConsumerLag computes the lag of group on topic from the group's committed
// offsets and the partitions' start and end offsets. It works whatever state
// the group is in (including no members or no commits at all), which
// kadm.Client.Lag does not cover for partitions never assigned.
func ConsumerLag(ctx context.Context, adm *kadm.Client, group, topic string) (TopicLag, error) {
	out := TopicLag{Group: group, Topic: topic}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return out, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return out, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if len(ends[topic]) == 0 {
		return out, fmt.Errorf("listing end offsets of %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return out, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return out, fmt.Errorf("fetching offsets of group %s: %w", group, err)
	}
	for p, end := range ends[topic] {
		pl := PartitionLag{Partition: p, Committed: -1, End: end.Offset}
		if s, ok := starts.Lookup(topic, p); ok && s.Err == nil {
			pl.Start = s.Offset
		}
		if c, ok := commits.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
			pl.Committed = c.At
		}
		from := pl.Committed
		if from < 0 {
			from = pl.Start
		}
		pl.Lag = max(0, pl.End-from)
		out.Total += pl.Lag
		out.Partitions = append(out.Partitions, pl)
	}
	slices.SortFunc(out.Partitions, func(a, b PartitionLag) int { return int(a.Partition - b.Partition) })
	return out, nil
}

// WaitLagZero polls ConsumerLag every interval until the total lag is 0 or
// ctx ends; onPoll (optional) sees every reading. It returns the last
// reading.
func WaitLagZero(ctx context.Context, adm *kadm.Client, group, topic string, interval time.Duration, onPoll func(TopicLag)) (TopicLag, error) {
	var last TopicLag
	var lastErr error
	for {
		l, err := ConsumerLag(ctx, adm, group, topic)
		switch {
		case err == nil:
			last, lastErr = l, nil
			if onPoll != nil {
				onPoll(l)
			}
			if l.Total == 0 {
				return l, nil
			}
		case ctx.Err() == nil:
			// A call cut short by the deadline says nothing new: keep the
			// last reading (or error) for the report below.
			lastErr = err
		}
		select {
		case <-ctx.Done():
			switch {
			case lastErr != nil:
				return last, fmt.Errorf("waiting for lag 0: %w (last error: %w)", ctx.Err(), lastErr)
			case last.Partitions == nil:
				return last, fmt.Errorf("waiting for lag 0: no reading before %w", ctx.Err())
			}
			return last, fmt.Errorf("waiting for lag 0 (still %d): %w", last.Total, ctx.Err())
		case <-time.After(interval):
		}
	}
}
