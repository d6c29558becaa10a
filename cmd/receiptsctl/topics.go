package main

// The topics command:
//
//	receiptsctl topics ensure [--topic T] [--partitions N] [--replication-factor R] [--config k=v]...
//	                          [--dlt-topic D] [--dlt-partitions N] [--dlt-config k=v]... [kafka flags]
//
// It creates the topics that are missing with the settings given, and
// reports the ones that exist with how they differ (partitions,
// replication factor, the configs given): it never deletes, alters or adds
// partitions to an existing topic. The Helm chart runs it as a
// pre-install/pre-upgrade hook. Identifiers here start with "topics".

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
)

// Defaults of topics ensure (the chart passes every value explicitly).
const (
	topicsPartitionsDefault    = 32
	topicsDLTPartitionsDefault = 4
	// topicsTimeout bounds the whole command.
	topicsTimeout = time.Minute
	// topicsMetadataPoll spaces the reads of the metadata while created
	// topics propagate (kgo serves metadata younger than its min age from
	// cache, so the client's min age is set to it).
	topicsMetadataPoll = 200 * time.Millisecond
)

const topicsUsage = `Usage:
  receiptsctl topics ensure [flags]   create the receipts topics when missing; report how existing ones differ

Run "receiptsctl topics ensure -h" for its flags.
`

func runTopics(ctx context.Context, args []string) error {
	return topicsRun(ctx, args, os.Stdout, os.Stderr)
}

func topicsRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] != "ensure" {
		fmt.Fprint(errOut, topicsUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return &exitError{code: 2, msg: "topics: the only subcommand is ensure"}
	}
	return topicsEnsure(ctx, args[1:], out, errOut)
}

// topicsConfigs is a repeatable k=v flag: one config per flag (a value
// may contain commas, e.g. cleanup.policy=compact,delete).
type topicsConfigs map[string]string

func (c topicsConfigs) String() string {
	parts := make([]string, 0, len(c))
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, k+"="+c[k])
	}
	return strings.Join(parts, " ")
}

func (c topicsConfigs) Set(s string) error {
	k, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("expected key=value, got %q", s)
	}
	c[strings.TrimSpace(k)] = v
	return nil
}

// topicsSpec is what one topic should be.
type topicsSpec struct {
	name       string
	partitions int32
	// replication is the replication factor; -1: the brokers' default.
	replication int16
	configs     topicsConfigs
}

// topicsResult is what ensure did with one topic.
type topicsResult struct {
	spec topicsSpec
	// created is true when this run created the topic.
	created bool
	// partitions and replication are the topic's, as read back.
	partitions  int
	replication int
	// differences lists how an existing topic differs from the spec.
	differences []string
	err         error
}

func topicsEnsure(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("topics ensure", "topics ensure [--topic T --partitions N --replication-factor R --config k=v ... --dlt-topic D --dlt-partitions N --dlt-config k=v ... --changes-topic C --changes-partitions N --changes-config k=v ...] [flags]")
	fs.SetOutput(errOut)
	kafka := kafkaconf.Config{ClientID: "receiptsctl"}
	kafka.RegisterFlags(fs)
	marks := topicsSpec{configs: topicsConfigs{}}
	dlt := topicsSpec{configs: topicsConfigs{}}
	changes := topicsSpec{configs: topicsConfigs{}}
	var partitions, dltPartitions, changesPartitions, replication int
	fs.StringVar(&marks.name, "topic", event.TopicDefault, "the marks topic")
	fs.IntVar(&partitions, "partitions", topicsPartitionsDefault, "partitions of --topic when created")
	fs.IntVar(&replication, "replication-factor", -1, "replication factor of both topics when created (-1: the brokers' default.replication.factor)")
	fs.Var(marks.configs, "config", "a topic config of --topic, `key=value` (repeatable), e.g. retention.ms=172800000")
	fs.StringVar(&dlt.name, "dlt-topic", event.DLTTopicDefault, "the dead-letter topic")
	fs.IntVar(&dltPartitions, "dlt-partitions", topicsDLTPartitionsDefault, "partitions of --dlt-topic when created")
	fs.Var(dlt.configs, "dlt-config", "a topic config of --dlt-topic, `key=value` (repeatable)")
	fs.StringVar(&changes.name, "changes-topic", "", "the change-feed topic the persister writes with --changes-topic (empty: not ensured)")
	fs.IntVar(&changesPartitions, "changes-partitions", topicsPartitionsDefault, "partitions of --changes-topic when created")
	fs.Var(changes.configs, "changes-config", "a topic config of --changes-topic, `key=value` (repeatable)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var bad []string
	if partitions < 1 || partitions > 1<<20 || dltPartitions < 1 || dltPartitions > 1<<20 || changesPartitions < 1 || changesPartitions > 1<<20 {
		bad = append(bad, "--partitions, --dlt-partitions and --changes-partitions must be at least 1")
	}
	if replication == 0 || replication < -1 || replication > 1<<14 {
		bad = append(bad, "--replication-factor must be -1 (the brokers' default) or at least 1")
	}
	if marks.name == "" || dlt.name == "" || marks.name == dlt.name {
		bad = append(bad, "--topic and --dlt-topic must be set and differ")
	}
	if changes.name != "" && (changes.name == marks.name || changes.name == dlt.name) {
		bad = append(bad, "--changes-topic must differ from --topic and --dlt-topic")
	}
	if len(bad) > 0 {
		return &exitError{code: 2, msg: "topics ensure: " + strings.Join(bad, "; ")}
	}
	marks.partitions, dlt.partitions = int32(partitions), int32(dltPartitions)
	marks.replication, dlt.replication = int16(replication), int16(replication)
	specs := []topicsSpec{marks, dlt}
	if changes.name != "" {
		changes.partitions, changes.replication = int32(changesPartitions), int16(replication)
		specs = append(specs, changes)
	}

	ctx, cancel := context.WithTimeout(ctx, topicsTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(kafka.Opts(nil, nil, ""), kgo.MetadataMinAge(topicsMetadataPoll))...)
	if err != nil {
		return fmt.Errorf("creating kafka client: %w", err)
	}
	defer cl.Close()
	results, err := topicsEnsureAll(ctx, kadm.NewClient(cl), specs)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range results {
		topicsPrint(out, r)
		if r.err != nil {
			failed = append(failed, r.spec.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("topics ensure: could not create %s", strings.Join(failed, ", "))
	}
	return nil
}

// topicsEnsureAll creates the missing topics and compares the existing
// ones with their specs. err is set when Kafka could not be asked at all;
// a topic's own failure is in its result.
func topicsEnsureAll(ctx context.Context, adm *kadm.Client, specs []topicsSpec) ([]topicsResult, error) {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	results := make([]topicsResult, len(specs))
	for i, s := range specs {
		results[i].spec = s
		d, ok := details[s.name]
		switch {
		case ok && d.Err == nil:
			continue // exists: compared below
		case ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			results[i].err = fmt.Errorf("describing topic %s: %w", s.name, d.Err)
			continue
		}
		configs := make(map[string]*string, len(s.configs))
		for k, v := range s.configs {
			configs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, s.partitions, s.replication, configs, s.name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			results[i].created = true
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created meanwhile (another hook run): compare it below.
		default:
			results[i].err = fmt.Errorf("creating topic %s: %w", s.name, err)
		}
	}

	// Read back every topic that exists now: partitions, replication, and
	// the configs the specs name. A topic just created takes a moment to
	// show in every broker's metadata.
	for {
		details, err = adm.ListTopics(ctx, names...)
		if err != nil {
			return nil, fmt.Errorf("listing topics: %w", err)
		}
		visible := true
		for _, r := range results {
			if d, ok := details[r.spec.name]; r.err == nil && (!ok || d.Err != nil || len(d.Partitions) == 0) {
				visible = false
			}
		}
		if visible {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the created topics to show in the metadata: %w", ctx.Err())
		case <-time.After(topicsMetadataPoll):
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("describing topic configs: %w", err)
	}
	for i := range results {
		r := &results[i]
		d, ok := details[r.spec.name]
		if r.err != nil || !ok || d.Err != nil {
			if r.err == nil {
				r.err = fmt.Errorf("topic %s missing after it was created", r.spec.name)
			}
			continue
		}
		r.partitions = len(d.Partitions)
		r.replication = d.Partitions.NumReplicas()
		if r.created {
			continue
		}
		switch want := int(r.spec.partitions); {
		case r.partitions < want:
			r.differences = append(r.differences, fmt.Sprintf("partitions: want %d, have %d (left as it is: adding partitions moves keys, an operator's call: kafka-topics --alter --partitions %d)",
				want, r.partitions, want))
		case r.partitions > want:
			r.differences = append(r.differences, fmt.Sprintf("partitions: want %d, have %d (left as it is: Kafka never removes partitions)", want, r.partitions))
		}
		if r.spec.replication > 0 && r.replication != int(r.spec.replication) {
			r.differences = append(r.differences, fmt.Sprintf("replication factor: want %d, have %d (left as it is: a reassignment changes it)", r.spec.replication, r.replication))
		}
		rc, cerr := configs.On(r.spec.name, nil)
		if cerr != nil || rc.Err != nil {
			r.differences = append(r.differences, fmt.Sprintf("configs: could not be read: %v", errors.Join(cerr, rc.Err)))
			continue
		}
		have := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			have[c.Key] = c
		}
		for _, k := range slices.Sorted(maps.Keys(r.spec.configs)) {
			want := r.spec.configs[k]
			c, ok := have[k]
			switch {
			case !ok:
				r.differences = append(r.differences, fmt.Sprintf("%s: want %s, the broker does not report it", k, want))
			case c.Value == nil || *c.Value != want:
				r.differences = append(r.differences, fmt.Sprintf("%s: want %s, have %s (%s; left as it is: kafka-configs --alter --add-config %s=%s)",
					k, want, c.MaybeValue(), strings.ToLower(c.Source.String()), k, want))
			}
		}
	}
	return results, nil
}

// topicsPrint writes one topic's outcome.
func topicsPrint(out io.Writer, r topicsResult) {
	switch {
	case r.err != nil:
		fmt.Fprintf(out, "topic %s: FAILED: %v\n", r.spec.name, r.err)
		return
	case r.created:
		fmt.Fprintf(out, "topic %s: created (%d partitions, replication factor %d", r.spec.name, r.partitions, r.replication)
		if len(r.spec.configs) > 0 {
			fmt.Fprintf(out, ", %s", r.spec.configs)
		}
		fmt.Fprintln(out, ")")
		return
	}
	fmt.Fprintf(out, "topic %s: exists (%d partitions, replication factor %d)", r.spec.name, r.partitions, r.replication)
	if len(r.differences) == 0 {
		fmt.Fprintln(out, ", as wanted")
		return
	}
	fmt.Fprintf(out, ", %d difference(s), nothing changed:\n", len(r.differences))
	for _, d := range r.differences {
		fmt.Fprintf(out, "  %s\n", d)
	}
}
