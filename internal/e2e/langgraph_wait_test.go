package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitingNode is what `enqueue status --json` shows of a parked node.
type waitingNode struct {
	ID         string          `json:"id"`
	State      string          `json:"state"`
	Owner      string          `json:"owner"`
	LeaseUntil *time.Time      `json:"lease_until"`
	Result     json.RawMessage `json:"result"`
	Wait       *struct {
		ID      string          `json:"id"`
		Request json.RawMessage `json:"request"`
	} `json:"wait"`
}

func (c *cluster) waitingNode(run, node string) waitingNode {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "status", run, "--json")
	require.Equal(c.t, 0, code, "status: %s", errOut)
	var s struct {
		Nodes []waitingNode `json:"nodes"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(out), &s), out)
	for _, n := range s.Nodes {
		if n.ID == node {
			return n
		}
	}
	c.t.Fatalf("run %s has no node %s: %s", run, node, out)
	return waitingNode{}
}

// sweptOnce waits until runner id's sweeper has made a whole pass (expired
// leases, stale READY nodes, thread queues, timed-out waits) since the
// runner started. A sweep begins by refreshing the runner's advertisement
// when it is due, and passes run one after another, so a refresh seen
// after an earlier one seen after the one at hand comes from a pass that
// started after the earlier one's pass ended.
func (c *cluster) sweptOnce(id string) {
	c.t.Helper()
	seen := func() time.Time {
		out, errOut, code := c.enqueue("", "workers", "--json")
		require.Equal(c.t, 0, code, "workers: %s", errOut)
		var list []struct {
			ID     string    `json:"id"`
			SeenAt time.Time `json:"seen_at"`
		}
		require.NoError(c.t, json.Unmarshal([]byte(out), &list), out)
		for _, w := range list {
			if w.ID == id {
				return w.SeenAt
			}
		}
		c.t.Fatalf("runner %s is not listed: %s", id, out)
		return time.Time{}
	}
	last, refreshes := seen(), 0
	waitUntil(c.t, 30*time.Second, "a whole sweep pass of "+id, func() bool {
		if s := seen(); s.After(last) {
			last, refreshes = s, refreshes+1
		}
		return refreshes == 2
	})
}

// A LangGraph graph that asks a person with interrupt() in its second
// step, run through runNode as an exec node, waits without a worker: the
// node is WAITING with the interrupt's value as its request, holds no
// lease, its process has exited 0, and the runner's only slot runs other
// work meanwhile. The wait survives a restart of every runner. `enqueue
// resume` with a value makes it go on, on a new runner: the graph gets the
// value from interrupt(), no step before the question runs again, and the
// run succeeds with the answer in its result.
func TestLangGraphRunNodeInterruptWaitsForAResume(t *testing.T) {
	t.Parallel()
	dir := lgPackage(t)
	c := newCluster(t)
	stepLog := filepath.Join(t.TempDir(), "steps.log")
	one := map[string]string{"CONCURRENCY": "1", "EXEC_STORE_COMMANDS": "node"}
	r1 := c.startRunner("hitl-r1", one)
	r2 := c.startRunner("hitl-r2", one)

	input, err := json.Marshal(map[string]any{"command": []string{"node", "test/fixtures/approval-agent.mjs"}, "dir": dir,
		"env": map[string]string{"STEP_LOG": stepLog, "STEP_MS": "50", "CHANGE": "v2"}})
	require.NoError(t, err)
	run := c.submit(`{"id":"hitl","thread":"hitl-thread","nodes":[{"id":"agent","kind":"exec","input":` + string(input) + `}]}`)

	waitUntil(t, 60*time.Second, "the agent to park on its interrupt", func() bool {
		return c.waitingNode(run, "agent").State == "WAITING"
	})
	n := c.waitingNode(run, "agent")
	require.NotNil(t, n.Wait)
	require.JSONEq(t, `{"ask":"deploy v2?"}`, string(n.Wait.Request), "the wait's request is the interrupt's value")
	require.Nil(t, n.LeaseUntil, "a waiting node holds no lease")
	require.Equal(t, "RUNNING", c.status(run).Status)
	waitUntil(t, 10*time.Second, "the agent's process to exit", func() bool {
		return slices.ContainsFunc(readSteps(t, stepLog), func(r stepRecord) bool { return r.Ev == "exit" })
	})
	for _, r := range readSteps(t, stepLog) {
		require.False(t, r.Ev == "exit" && r.Code != 0, "the parked agent exited %d", r.Code)
	}
	for _, ev := range c.events(run) {
		require.NotEqual(t, "committed", ev.Type, "nothing was committed")
	}

	// No worker slot is held: each runner, with one slot, runs another node.
	for i, id := range []string{"other-1", "other-2"} {
		other := c.submit(`{"id":"` + id + `","nodes":[{"id":"x","kind":"exec","input":{"command":["true"]}}]}`)
		require.Equal(t, 0, c.watch(other), "run %d beside the waiting node", i+1)
	}

	// Every runner restarts; the wait is all in Redis.
	for _, r := range []*runnerProc{r1, r2} {
		r.signal(t, syscall.SIGTERM)
		require.Equal(t, 0, r.exitCode(t, 30*time.Second), "runner %s shut down", r.id)
	}
	c.startRunner("hitl-r3", one)
	c.sweptOnce("hitl-r3") // its dequeue loops have polled all along
	require.Equal(t, "WAITING", c.waitingNode(run, "agent").State, "still waiting after a restart of every runner")

	out, errOut, code := c.enqueue("", "resume", run, "agent", "--value", `{"approved":true,"by":"ann"}`)
	require.Equal(t, 0, code, "resume: %s", errOut)
	var answer struct {
		Wait  string          `json:"wait"`
		Value json.RawMessage `json:"value"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &answer), out)
	require.JSONEq(t, `{"approved":true,"by":"ann"}`, string(answer.Value))
	require.NotEmpty(t, answer.Wait, "the answer names the wait it answered")
	require.Equal(t, 0, c.watch(run), "the resumed run succeeds")

	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	require.Equal(t, "hitl-r3", st.node("agent").Owner)
	var got struct {
		Change   string          `json:"change"`
		Approval json.RawMessage `json:"approval"`
		Steps    []agentStep     `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(st.node("agent").Result, &got), string(st.node("agent").Result))
	require.JSONEq(t, `{"approved":true,"by":"ann"}`, string(got.Approval), "the resume's value reached the graph")
	require.Equal(t, []string{"plan", "approve", "deploy"}, stepNames(got.Steps))
	require.NotEqual(t, "hitl-r3", got.Steps[0].Worker, "plan ran before the wait, not again after it")
	require.Equal(t, "hitl-r3", got.Steps[2].Worker)
	var started []string
	for _, r := range readSteps(t, stepLog) {
		if r.Ev == "start" {
			started = append(started, r.Step)
		}
	}
	require.Equal(t, []string{"plan", "approve", "deploy"}, started, "every step ran once")
}
