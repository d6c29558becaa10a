package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/producer"
)

// runSpool runs "spool replay": it sends an orphaned spool directory (a
// gateway pod scaled away, its volume mounted elsewhere) to Kafka in
// order, and exits when the spool is empty. The gateway must not run on
// the directory meanwhile (the spool's lock file refuses a second user).
func runSpool(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "replay" {
		return &exitError{code: 2, msg: "spool: the subcommand is replay (receiptsctl spool replay --dir DIR [flags])"}
	}
	fs := newFlagSet("spool replay", "spool replay --dir DIR [--timeout D] [flags]")
	dir := fs.String("dir", "", "the spool directory to replay (required)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (what is left stays in the spool)")
	cfg := producer.Config{Topic: event.TopicDefault, Kafka: kafkaconf.Config{ClientID: "receiptsctl"}}
	cfg.Kafka.RegisterFlags(fs)
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "topic the spooled records go to")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return &exitError{code: 2, msg: "spool replay: --dir is required"}
	}
	cfg.SpoolDir, cfg.MaxRecordBytes, cfg.SpoolDrainTimeout = *dir, gate.MaxRecordBytes, -1
	p, err := producer.New(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		return fmt.Errorf("replaying %s: %w", *dir, err)
	}
	fmt.Fprintf(out, "spool %s replayed to %s: empty\n", *dir, cfg.Topic)
	return nil
}
