package runner

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// An attempt's log lines carry the node's attributes exactly as slog's
// With would put them, for the worker's own attributes and groups, for
// loggers derived from it, and only on records the level lets through.
func TestNodeLoggerWritesWhatWithWould(t *testing.T) {
	l := fence.Lease{Thread: "th", Run: "r1", Node: "n1", Epoch: 7, Attempt: 2}
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"record", func(log *slog.Logger) { log.Warn("stale_write_rejected", "op", "commit", "err", "fenced") }},
		{"derived", func(log *slog.Logger) { log.With("x", 1).WithGroup("g").Info("released", "reason", "drain") }},
		{"filtered", func(log *slog.Logger) { log.Debug("committed", "ready", 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want bytes.Buffer
			mk := func(buf *bytes.Buffer) *slog.Logger {
				h := slog.NewJSONHandler(buf, &slog.HandlerOptions{ReplaceAttr: noTime})
				return slog.New(h).With("component", "worker").WithGroup("w")
			}
			tc.log(nodeLogger(mk(&got), l))
			tc.log(mk(&want).With("run_id", l.Run, "node_id", l.Node, "epoch", l.Epoch, "attempt", l.Attempt))
			require.Equal(t, want.String(), got.String())
			if tc.name != "filtered" {
				require.Contains(t, got.String(), `"run_id":"r1","node_id":"n1","epoch":7,"attempt":2`)
			}
		})
	}
}
