package drainbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// broker is a devbroker process on a free port and its own data directory.
type broker struct {
	*child
	addr      string
	adm       *kadm.Client
	cl        *kgo.Client
	closeOnce sync.Once
}

// startBroker starts bin (cmd/devbroker) with topic of the given
// partitions on a fresh port, data in dataDir, and waits until the topic
// answers with every partition.
func startBroker(ctx context.Context, bin, dataDir, logPath, topic string, partitions int) (*broker, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c, err := startChild("devbroker", logPath, bin,
		"--listen-port", strconv.Itoa(port), "--data-dir", dataDir,
		"--topic", topic, "--partitions", strconv.Itoa(partitions))
	if err != nil {
		return nil, err
	}
	b := &broker{child: c, addr: "127.0.0.1:" + strconv.Itoa(port)}
	b.cl, err = kgo.NewClient(kgo.SeedBrokers(b.addr),
		kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		_ = c.stop(5 * time.Second)
		return nil, fmt.Errorf("creating kafka admin client: %w", err)
	}
	b.adm = kadm.NewClient(b.cl)
	err = poll(ctx, 50*time.Millisecond, 30*time.Second, "waiting for devbroker's topic", func() (bool, error) {
		if done, err := c.exited(); done {
			return false, fmt.Errorf("devbroker exited while starting: %v (log %s)", err, logPath)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		td, err := b.adm.ListTopics(rctx, topic)
		if err != nil || !td.Has(topic) || td[topic].Err != nil {
			return false, nil
		}
		return len(td[topic].Partitions) == partitions, nil
	})
	if err != nil {
		_ = b.stop() // the wait error is the one to report
		return nil, err
	}
	return b, nil
}

// stop closes the admin client and stops the broker (SIGTERM: it writes
// its snapshot; killed after 30 s).
func (b *broker) stop() error {
	b.closeOnce.Do(b.cl.Close)
	return b.child.stop(30 * time.Second)
}

// ProduceResult is what loading the data set onto the broker took.
type ProduceResult struct {
	Records       int     `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// EndOffsets are the partitions' high watermarks afterwards.
	EndOffsets map[int32]int64 `json:"-"`
}

// produce writes every event of ds to topic with franz-go's defaults (the
// gateway's: key-hash partitioner, idempotent, acks=all, snappy batches)
// and returns the partition of each event.
func (b *broker) produce(ctx context.Context, ds *Dataset, topic string) (ProduceResult, []int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return ProduceResult{}, nil, fmt.Errorf("creating producer: %w", err)
	}
	defer cl.Close()
	parts := make([]int32, len(ds.Events))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for i := range ds.Events {
		rec, err := ds.Record(i)
		if err != nil {
			return ProduceResult{}, nil, err
		}
		wg.Add(1)
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
				return
			}
			parts[i] = r.Partition
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return ProduceResult{}, nil, fmt.Errorf("flushing the producer: %w", err)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if first != nil {
		return ProduceResult{}, nil, fmt.Errorf("producing: %w", first)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return ProduceResult{}, nil, fmt.Errorf("listing end offsets: %w", err)
	}
	res := ProduceResult{Records: len(ds.Events), Seconds: secs, RecordsPerSec: float64(len(ds.Events)) / secs, EndOffsets: map[int32]int64{}}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		res.EndOffsets[o.Partition] = o.Offset
		total += o.Offset
	})
	if total != int64(len(ds.Events)) {
		return ProduceResult{}, nil, fmt.Errorf("the topic holds %d records after producing %d (not a fresh broker?)", total, len(ds.Events))
	}
	return res, parts, nil
}

// committed returns the group's committed offsets (absent partitions have
// none yet).
func (b *broker) committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := b.adm.FetchOffsets(rctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// errBrokerGone says the broker died during a measurement.
var errBrokerGone = errors.New("devbroker exited during the measurement")
