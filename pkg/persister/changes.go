package persister

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// opChanges is the change feed's produce, retried like the dead letters.
const opChanges = "changes"

// changeSchemaVersion is ReadStateChange.schema_version.
const changeSchemaVersion = 1

// changeSink gathers a window's change-feed entries from its cursor
// statements (which run Writers at a time). Only statements that
// committed add theirs.
type changeSink struct {
	mu      sync.Mutex
	changes []cursors.CursorChange
	// threadChanges are the thread cursors' entries, from the thread
	// statements that use upsertThreads.
	threadChanges []threads.CursorChange
}

// upsertThreads is the thread register statement with the feed on:
// threads.Store.WriteChangesPG. The thread kind's statements call it when the
// feed is on, as the cursor statements call upsert.
func (f *changeSink) upsertThreads(store threads.Store) func(context.Context, []thread.State) (int64, error) {
	return func(ctx context.Context, states []thread.State) (int64, error) {
		changes, err := store.WriteChangesPG(ctx, states)
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.threadChanges = append(f.threadChanges, changes...)
		f.mu.Unlock()
		return int64(len(states)), nil
	}
}

// upsert is the cursor statement with the feed on: UpsertChanges, for
// every statement size (its answer needs the one-statement form, so the
// COPY path of large statements is not used).
func (f *changeSink) upsert(store *pgstore.Store) func(context.Context, []receipt.State) (int64, error) {
	return func(ctx context.Context, states []receipt.State) (int64, error) {
		changes, err := cursors.NewPostgres(store).UpsertChanges(ctx, states)
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.changes = append(f.changes, changes...)
		f.mu.Unlock()
		return int64(len(states)), nil
	}
}

// changeRecord is one entry of the feed, keyed "user:channel" like the
// source topic, so a key's changes stay in order on one partition.
func changeRecord(topic string, c cursors.CursorChange) (*kgo.Record, error) {
	kind := recordv1.Kind_READ
	if c.Delivered {
		kind = recordv1.Kind_DELIVERED
	}
	v, err := proto.Marshal(&recordv1.ReadStateChange{
		SchemaVersion: changeSchemaVersion, UserId: c.Key.User, ChannelId: c.Key.Channel, Kind: kind,
		Position:  &recordv1.Position{Epoch: c.Cursor.Position.Epoch, Seq: c.Cursor.Position.Seq},
		MessageId: c.Cursor.MessageID, AtUnixMs: c.AtUnixMs,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding a change: %w", err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(c.Key.KafkaKey()), Value: v, Headers: event.ChangeHeaders()}, nil
}

// threadChangeRecord is one thread cursor's entry of the feed, keyed as
// the source topic keys the user's thread events ("user:channel").
func threadChangeRecord(topic string, c threads.CursorChange) (*kgo.Record, error) {
	kind := recordv1.Kind_READ
	if c.Delivered {
		kind = recordv1.Kind_DELIVERED
	}
	v, err := proto.Marshal(&recordv1.ReadStateChange{
		SchemaVersion: changeSchemaVersion, UserId: c.Key.User, ChannelId: c.Key.Channel, Kind: kind,
		Position:  &recordv1.Position{Epoch: c.Cursor.Position.Epoch, Seq: c.Cursor.Position.Seq},
		MessageId: c.Cursor.MessageID, AtUnixMs: c.AtUnixMs, ThreadRootSeq: c.Key.Root,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding a thread change: %w", err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(c.Key.ChannelKey().KafkaKey()), Value: v, Headers: event.ChangeHeaders()}, nil
}

// produceChanges sends a window's feed and waits for every ack, retrying
// the failed records for as long as Kafka is unavailable: the window's
// offsets wait for it (at least once).
func (p *Persister) produceChanges(ctx context.Context, feed *changeSink) error {
	if feed == nil || len(feed.changes)+len(feed.threadChanges) == 0 {
		return nil
	}
	// Each attempt builds its records afresh from the entries.
	type entry func(topic string) (*kgo.Record, error)
	pending := make([]entry, 0, len(feed.changes)+len(feed.threadChanges))
	for _, c := range feed.changes {
		pending = append(pending, func(topic string) (*kgo.Record, error) { return changeRecord(topic, c) })
	}
	for _, c := range feed.threadChanges {
		pending = append(pending, func(topic string) (*kgo.Record, error) { return threadChangeRecord(topic, c) })
	}
	err := p.retry(ctx, p.log, opChanges, isProduceRetryable, func(ctx context.Context) error {
		recs := make([]*kgo.Record, len(pending))
		index := make(map[*kgo.Record]int, len(pending))
		for i, c := range pending {
			r, err := c(p.cfg.ChangesTopic)
			if err != nil {
				return err
			}
			recs[i] = r
			index[r] = i
		}
		results := p.cl.ProduceSync(ctx, recs...)
		var failed []entry
		for _, r := range results {
			if r.Err != nil {
				failed = append(failed, pending[index[r.Record]])
			}
		}
		p.m.changes.Add(float64(len(pending) - len(failed)))
		pending = failed
		err := results.FirstErr()
		if class := kafkaconf.Classify(err); class == errclass.Rejected || class == errclass.Permanent {
			p.log.Error("kafka refuses the change feed for good; the partition waits for an operator",
				zap.String("changes_topic", p.cfg.ChangesTopic), zap.Int("num_records", len(pending)), zap.Error(err))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("producing %d changes to %s: %w", len(pending), p.cfg.ChangesTopic, err)
	}
	return nil
}
