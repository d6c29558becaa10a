//go:build tools

// Package pin keeps the project's chosen dependencies in go.mod at their
// pinned versions while code that uses them is being written.
package pin

import (
	_ "connectrpc.com/connect"
	_ "connectrpc.com/grpchealth"
	_ "connectrpc.com/grpcreflect"
	_ "connectrpc.com/vanguard"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/sethvargo/go-retry"
	_ "github.com/stretchr/testify/require"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/plugin/kprom"
	_ "github.com/twmb/franz-go/plugin/kzap"
	_ "go.uber.org/zap"
	_ "google.golang.org/genproto/googleapis/api/annotations"
)
