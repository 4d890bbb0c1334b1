package runner

import (
	"context"
	"log/slog"

	"github.com/batonrun/baton/fence"
)

// nodeLogger is the logger of one attempt: the worker's, with the node's
// run, id, epoch and attempt on every record. slog's With formats those
// attributes when called, on every attempt; nearly all attempts log
// nothing at the worker's level, so nodeHandler adds them only to a
// record that is written, in the same place With would have put them.
func nodeLogger(base *slog.Logger, l fence.Lease) *slog.Logger {
	return slog.New(&nodeHandler{next: base.Handler(), attrs: [4]slog.Attr{
		slog.String("run_id", l.Run), slog.String("node_id", l.Node),
		slog.Int64("epoch", l.Epoch), slog.Int64("attempt", l.Attempt)}})
}

type nodeHandler struct {
	next  slog.Handler
	attrs [4]slog.Attr
}

func (h *nodeHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *nodeHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs[:]...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *nodeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.next.WithAttrs(h.attrs[:]).WithAttrs(attrs)
}

func (h *nodeHandler) WithGroup(name string) slog.Handler {
	return h.next.WithAttrs(h.attrs[:]).WithGroup(name)
}
