package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

const (
	// longTTL is a lease that cannot run out during a test.
	longTTL = 30 * time.Second
	// shortTTL and grace are for tests that let a lease expire: short, so
	// waiting on a real server's clock stays cheap.
	shortTTL = 200 * time.Millisecond
	grace    = 100 * time.Millisecond
	// pastExpiry is how far to move Redis's clock for a shortTTL lease to be
	// taken over: past lease_until + grace, with a margin.
	pastExpiry = shortTTL + grace + 50*time.Millisecond
)

// testBundle is what one test needs on one backend.
type testBundle struct {
	be    redistest.Backend
	store *fence.Store
	ctx   context.Context
}

// forEachBackend runs fn on miniredis and on a real redis-server, each as a
// parallel subtest with its own fresh Redis.
func forEachBackend(t *testing.T, fn func(t *testing.T, tb *testBundle)) {
	t.Helper()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, &testBundle{be: be, store: fence.New(be.Client, nil), ctx: t.Context()})
		})
	}
}

// real reports whether the backend is a real redis-server (its clock moves
// on its own).
func (tb *testBundle) real() bool { return tb.be.Mini == nil }

// advance moves Redis's TIME forward by d.
func (tb *testBundle) advance(t *testing.T, d time.Duration) {
	t.Helper()
	tb.be.Advance(t, d)
}

// redisNow is Redis's TIME.
func (tb *testBundle) redisNow(t *testing.T) time.Time {
	t.Helper()
	now, err := tb.be.Client.Time(tb.ctx).Result()
	require.NoError(t, err)
	return now
}

// nodeDef is one node of a test run.
type nodeDef struct {
	ID          string
	Deps        []string
	MaxAttempts int
}

// node is a node with 3 attempts that depends on deps.
func node(id string, deps ...string) nodeDef { return nodeDef{ID: id, Deps: deps, MaxAttempts: 3} }

// attempts sets the node's max attempts.
func (d nodeDef) attempts(n int) nodeDef { d.MaxAttempts = n; return d }

// spec builds SubmitArgs the way runner.Client does: dependents and
// transitive descendants filled, no nil lists, input "null".
func spec(run string, defs ...nodeDef) fence.SubmitArgs {
	dependents := map[string][]string{}
	for _, d := range defs {
		for _, dep := range d.Deps {
			dependents[dep] = append(dependents[dep], d.ID)
		}
	}
	nodes := make([]fence.NodeSpec, len(defs))
	for i, d := range defs {
		desc := []string{}
		seen := map[string]bool{}
		queue := append([]string{}, dependents[d.ID]...)
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			if seen[id] {
				continue
			}
			seen[id] = true
			desc = append(desc, id)
			queue = append(queue, dependents[id]...)
		}
		nodes[i] = fence.NodeSpec{ID: d.ID, Kind: "noop", Queue: "default", Input: "null",
			Deps: append([]string{}, d.Deps...), Dependents: append([]string{}, dependents[d.ID]...),
			Descendants: desc, MaxAttempts: d.MaxAttempts}
	}
	return fence.SubmitArgs{Run: run, Digest: "digest-" + run, Nodes: nodes}
}

func (tb *testBundle) submit(t *testing.T, a fence.SubmitArgs) fence.SubmitResult {
	t.Helper()
	res, err := tb.store.Submit(tb.ctx, a)
	require.NoError(t, err)
	require.True(t, res.Created, "run %s created", a.Run)
	return res
}

// ref names a node of a run that is its own thread.
func ref(run, node string) fence.NodeRef { return fence.NodeRef{Thread: run, Run: run, Node: node} }

// claim claims run/node for owner and requires success.
func (tb *testBundle) claim(t *testing.T, run, node, owner string, ttl time.Duration) *fence.Claimed {
	t.Helper()
	c, err := tb.store.Claim(tb.ctx, ref(run, node), owner, ttl, grace)
	require.NoError(t, err, "claim %s/%s by %s", run, node, owner)
	return c
}

// commit commits c with result and requires success.
func (tb *testBundle) commit(t *testing.T, c *fence.Claimed, result string) fence.Committed {
	t.Helper()
	res, err := tb.store.Commit(tb.ctx, c.Lease, []byte(result), c.Dependents)
	require.NoError(t, err, "commit %s", c.Lease)
	return res
}

func (tb *testBundle) getRun(t *testing.T, run string) *fence.RunInfo {
	t.Helper()
	info, err := tb.store.GetRun(tb.ctx, run)
	require.NoError(t, err)
	return info
}

// nodeInfo reads one node through GetRun.
func (tb *testBundle) nodeInfo(t *testing.T, run, id string) fence.NodeInfo {
	t.Helper()
	for _, n := range tb.getRun(t, run).Nodes {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("run %s has no node %s", run, id)
	return fence.NodeInfo{}
}

// states maps node id to state.
func (tb *testBundle) states(t *testing.T, run string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range tb.getRun(t, run).Nodes {
		out[n.ID] = n.State
	}
	return out
}

func (tb *testBundle) events(t *testing.T, run string) []fence.Event {
	t.Helper()
	evs, err := tb.store.Events(tb.ctx, run, "", 0)
	require.NoError(t, err)
	return evs
}

// ofType returns the events of type typ, in stream order.
func ofType(evs []fence.Event, typ string) []fence.Event {
	var out []fence.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// indexOf returns the position of the first event of type typ, or -1.
func indexOf(evs []fence.Event, typ string) int {
	for i, e := range evs {
		if e.Type == typ {
			return i
		}
	}
	return -1
}
