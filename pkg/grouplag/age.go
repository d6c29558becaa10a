package grouplag

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Oldest is the position from which a group has not consumed a partition:
// its committed offset, or the partition's start without a commit (or when
// retention deleted past the commit). It is the end offset when there is
// no lag.
func (p PartitionLag) Oldest() int64 {
	return max(p.Committed, p.Start)
}

// RecordTimes reads the timestamp of the record at each partition's offset
// in at (the first record at or after it), with one small Fetch to the
// partition's leader each: the broker returns at least the first record
// batch (KIP-74), so a fetch costs one batch. Partitions whose offset has no
// record yet (at the end) are left out; so are partitions whose fetch failed,
// with the failures joined in err.
func RecordTimes(ctx context.Context, cl *kgo.Client, topic string, at map[int32]int64) (map[int32]time.Time, error) {
	out := map[int32]time.Time{}
	if len(at) == 0 {
		return out, nil
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return out, fmt.Errorf("reading metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return out, fmt.Errorf("reading metadata of %s: %w", topic, errors.Join(td.Err, kerr.UnknownTopicOrPartition))
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for p, offset := range at {
		pd, ok := td.Partitions[p]
		if !ok || pd.Err != nil {
			errs = append(errs, fmt.Errorf("partition %d: no leader: %w", p, errors.Join(pd.Err, kerr.UnknownTopicOrPartition)))
			continue
		}
		wg.Go(func() {
			ts, found, err := recordTime(ctx, cl, topic, td.ID, p, pd.Leader, offset)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("partition %d at offset %d: %w", p, offset, err))
			case found:
				out[p] = ts
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// recordTime fetches the first batch at offset from the leader and returns
// the timestamp of the first record at or after offset.
func recordTime(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, partition, leader int32, offset int64) (time.Time, bool, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	// One byte: the broker still returns the first whole batch (KIP-74),
	// and nothing more.
	req.MaxBytes = 1
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return time.Time{}, false, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return time.Time{}, false, err
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if rp.Partition != partition {
				continue
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: topic, Partition: partition}, rp, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return time.Time{}, false, fp.Err
			}
			for _, r := range fp.Records {
				if r.Offset >= offset {
					return r.Timestamp, true, nil
				}
			}
		}
	}
	return time.Time{}, false, nil
}
