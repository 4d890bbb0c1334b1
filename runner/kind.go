package runner

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/batonrun/baton/fence"
)

// Kind runs one kind of node ("exec", "http", or a program's own). Run is
// called once per attempt with a context that carries the Lease and is
// cancelled with a cause (ErrRunCancelled, ErrLeaseLost, ErrShutdown) when
// the attempt must stop. Run returns the node's result as JSON; an error
// fails the attempt (retried while attempts remain, unless Permanent).
//
// Run may be called again for the same node on another worker: the queue
// delivers at least once and a paused worker is taken over. Side effects
// should carry Task.Token() so a downstream service can reject a stale
// owner.
type Kind interface {
	Run(ctx context.Context, t *Task) (json.RawMessage, error)
}

// KindFunc adapts a function to Kind.
type KindFunc func(ctx context.Context, t *Task) (json.RawMessage, error)

// Run calls f.
func (f KindFunc) Run(ctx context.Context, t *Task) (json.RawMessage, error) { return f(ctx, t) }

// Task is one attempt of one node, as handed to a Kind.
type Task struct {
	Lease   fence.Lease
	Kind    string
	Input   json.RawMessage
	Timeout time.Duration // the node's timeout; zero: none. ctx carries it too.
	// Deps are the committed results of the node's direct dependencies, by
	// id; nil when it has none. See DepResult.
	Deps map[string]json.RawMessage

	// ckpt saves and reads checkpoints (checkpoint.go); nil outside a worker.
	ckpt *checkpointer
	// stream numbers the attempt's stream batches (stream.go).
	stream taskStream
	// resume answers the wait the node was parked on (wait.go); nil when
	// it was not resumed.
	resume *fence.Answer
	// tr is the attempt's span (tracing.go); nil when tracing is off.
	tr       *attemptTrace
	progress atomic.Int64 // -1: not reported
	spent    atomic.Int64 // the total reported by Spend, plus 1; 0: none (spend.go)
	// changed, when set, is told that progress changed (the worker's
	// heartbeater); set before Run is called, never after.
	changed func()
}

// NewTask returns a task for a lease; the runtime makes them, tests of
// custom kinds may too.
func NewTask(l fence.Lease, kind string, input json.RawMessage, timeout time.Duration) *Task {
	t := &Task{Lease: l, Kind: kind, Input: input, Timeout: timeout}
	t.progress.Store(-1)
	return t
}

// SetProgress reports progress (0-100). It returns at once; the worker
// stores a change within about a quarter of a second with an early renewal
// of the lease (a few writes per second per node at most, however often it
// is called), so watchers see it while the node runs. Like a heartbeat, it
// proves liveness, never success, and it is refused once the attempt lost
// its lease.
func (t *Task) SetProgress(p int) {
	v := int64(max(0, min(p, 100)))
	if t.progress.Swap(v) != v && t.changed != nil {
		t.changed()
	}
}

// Progress returns the last reported progress, or -1.
func (t *Task) Progress() int { return int(t.progress.Load()) }

// Token is the fencing token to hand to side effects.
func (t *Task) Token() fence.Token { return t.Lease.Token() }

// Causes with which a handler's context is cancelled; read them with
// context.Cause.
var (
	// ErrRunCancelled: a user cancelled the run.
	ErrRunCancelled = errors.New("baton: run cancelled")
	// ErrLeaseLost: the lease was taken over, or no heartbeat succeeded for
	// longer than the lease can be trusted (self-fencing). Stop: the
	// attempt's result is never committed and its checkpoints are refused.
	// A self-fenced worker gives the node back (a fenced release, refused
	// if another worker took over), so the attempt costs none of the
	// node's max_attempts.
	ErrLeaseLost = errors.New("baton: lease lost")
	// ErrShutdown: the worker is shutting down; reach a safe point and
	// return. The node is released and resumed by another worker.
	ErrShutdown = errors.New("baton: worker shutting down")
)

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as final: the node FAILS without further attempts
// (e.g. an HTTP 4xx, a malformed input).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type leaseKey struct{}

// LeaseFrom returns the lease of the attempt ctx belongs to.
func LeaseFrom(ctx context.Context) (fence.Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(fence.Lease)
	return l, ok
}

func withLease(ctx context.Context, l fence.Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// DepResult returns the committed result of the direct dependency id, and
// whether id is one. Every attempt of a node, and every worker that takes
// it over, sees the same results: a dependency has SUCCEEDED before its
// dependent runs, and a SUCCEEDED node never changes again.
func (t *Task) DepResult(id string) (json.RawMessage, bool) {
	r, ok := t.Deps[id]
	return r, ok
}
