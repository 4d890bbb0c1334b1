package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runNodeSpec is a run of test/fixtures/runnode-agent.mjs as one exec node.
func runNodeSpec(t *testing.T, dir, id, thread, multitask string, env map[string]string) string {
	t.Helper()
	input, err := json.Marshal(map[string]any{"command": []string{"node", "test/fixtures/runnode-agent.mjs"}, "dir": dir, "env": env})
	require.NoError(t, err)
	spec := map[string]any{"id": id, "thread": thread, "nodes": []any{map[string]any{"id": "agent", "kind": "exec", "input": json.RawMessage(input)}}}
	if multitask != "" {
		spec["multitask"] = multitask
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	return string(b)
}

type runNodeResult struct {
	Topic string      `json:"topic"`
	Steps []agentStep `json:"steps"`
}

func stepNames(steps []agentStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Step)
	}
	return out
}

// A run submitted with multitask interrupt while another run of the thread
// is in the middle of its graph answers its own input: runNode starts the
// graph afresh on the thread's state instead of resuming the interrupted
// run's graph.
func TestLangGraphRunNodeInterruptRunAnswersItsOwnInput(t *testing.T) {
	t.Parallel()
	dir := lgPackage(t)
	c := newCluster(t)
	stepLog := filepath.Join(t.TempDir(), "steps.log")
	c.startRunner("lg-r1", lgEnv)
	first := c.submit(runNodeSpec(t, dir, "i1", "chat", "", map[string]string{
		"STEP_LOG": stepLog, "AGENT_TOPIC": "first", "LONG_STEP": "analyze", "LONG_MS": "60000", "STEP_MS": "50"}))
	waitUntil(t, 60*time.Second, "i1 to reach its long step", func() bool {
		return slices.ContainsFunc(readSteps(t, stepLog), func(r stepRecord) bool { return r.Ev == "start" && r.Step == "analyze" })
	})
	second := c.submit(runNodeSpec(t, dir, "i2", "chat", "interrupt", map[string]string{
		"STEP_LOG": stepLog, "AGENT_TOPIC": "second", "STEP_MS": "50"}))
	// Polled, not watched: enqueue watch takes a QUEUED run for an ended
	// one (terminal() in cmd/enqueue/status.go) and exits 1 at once.
	waitUntil(t, 60*time.Second, "i2 to end", func() bool {
		s := c.status(second).Status
		return s != "RUNNING" && s != "PENDING" && s != "QUEUED"
	})
	require.Equal(t, "SUCCEEDED", c.status(second).Status)
	require.Equal(t, "CANCELLED", c.status(first).Status)

	var got runNodeResult
	require.NoError(t, json.Unmarshal(c.status(second).node("agent").Result, &got))
	require.Equal(t, "second", got.Topic, "i2's own input")
	// The thread's state carried over: i1's finished steps, then i2's whole graph.
	require.Equal(t, []string{"plan", "research", "plan", "research", "analyze", "write", "check", "publish"}, stepNames(got.Steps))
}

// A graph that finished under a runner that was then stopped before its
// commit is not run again by the next owner: runNode finds the run's own
// finished checkpoint and its state is the result.
func TestLangGraphRunNodeDoesNotRunAFinishedGraphAgain(t *testing.T) {
	t.Parallel()
	dir := lgPackage(t)
	c := newCluster(t)
	stepLog := filepath.Join(t.TempDir(), "steps.log")
	r1 := c.startRunner("lg-r1", lgEnv)
	run := c.submit(runNodeSpec(t, dir, "finished", "done-thread", "", map[string]string{
		"STEP_LOG": stepLog, "STEP_MS": "50", "STALL_AFTER_EPOCH": "1"}))
	waitUntil(t, 60*time.Second, "the graph to finish on lg-r1, its result not yet printed", func() bool {
		return slices.ContainsFunc(readSteps(t, stepLog), func(r stepRecord) bool { return r.Ev == "stall" })
	})
	r1.signal(t, syscall.SIGSTOP)
	c.startRunner("lg-r2", lgEnv)
	waitUntil(t, 20*time.Second, "lg-r2 to take the node over", func() bool {
		return slices.ContainsFunc(c.timedEvents(run), func(e timedEvent) bool { return e.Type == "takeover" })
	})
	r1.signal(t, syscall.SIGCONT)
	require.Equal(t, 0, c.watch(run))
	st := c.status(run)
	require.Equal(t, "lg-r2", st.node("agent").Owner)
	var got runNodeResult
	require.NoError(t, json.Unmarshal(st.node("agent").Result, &got))
	require.Equal(t, []string{"plan", "research", "analyze", "write", "check", "publish"}, stepNames(got.Steps))
	for _, s := range got.Steps {
		require.Equal(t, int64(1), s.Epoch, "step %s was computed once, by the first owner", s.Step)
	}
	for _, r := range readSteps(t, stepLog) {
		require.False(t, r.Ev == "start" && r.Worker == "lg-r2", "lg-r2 ran step %s again", r.Step)
	}
}
