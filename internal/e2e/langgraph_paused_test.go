package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stepRecord is one line of an e2e agent's STEP_LOG (test/fixtures/steps.mjs).
type stepRecord struct {
	Ev     string `json:"ev"` // start, end, exit
	Step   string `json:"step"`
	Code   int    `json:"code"`
	Epoch  int64  `json:"epoch"`
	Worker string `json:"worker"`
	Pid    int    `json:"pid"`
	T      int64  `json:"t"` // Unix ms
}

func readSteps(t *testing.T, path string) []stepRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []stepRecord
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r stepRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		out = append(out, r)
	}
	return out
}

// timedEvent is an event of enqueue events --json with its time.
type timedEvent struct {
	Type    string            `json:"type"`
	Epoch   int64             `json:"epoch"`
	Worker  string            `json:"worker"`
	At      time.Time         `json:"at"`
	Details map[string]string `json:"details"`
}

func (c *cluster) timedEvents(run string) []timedEvent {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "events", run, "--json")
	require.Equal(c.t, 0, code, "events: %s", errOut)
	var evs []timedEvent
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e timedEvent
		require.NoError(c.t, json.Unmarshal([]byte(line), &e), line)
		evs = append(evs, e)
	}
	return evs
}

// pausedRunner is what lgPausedRunner saw: the step log and the result.
type pausedRunner struct {
	steps  []stepRecord
	result json.RawMessage
	// paused is the pid of the paused runner's agent; takeover is when the
	// new runner claimed the node (Redis time), exit when the paused agent
	// exited (its own clock, the same machine's).
	paused                     int
	takeover, exit, leaseUntil time.Time
	leaseTTL                   time.Duration
	longStep                   string
	pausedEpochRuns            []string // the steps the paused agent started
}

// lgPausedRunner runs agent (a file of js) as an exec
// node on thread, on runner lg-r1. When the agent is in its long step,
// lg-r1 alone is paused (SIGSTOP) past its lease; its agent, a separate
// process, runs on. Another runner takes the node over; lg-r1 is resumed
// (SIGCONT) once its agent has exited. It checks what must hold whatever
// the agent: the paused agent starts no later step and exits 75 within a
// lease plus a second of the takeover, while its runner is still stopped;
// lg-r1 records the attempt as abandoned, not failed; the node ends and
// the run SUCCEEDS on lg-r2, committed once.
func lgPausedRunner(t *testing.T, agent, thread string) pausedRunner {
	dir := lgPackage(t)
	c := newCluster(t)
	stepLog := filepath.Join(t.TempDir(), "steps.log")
	const longStep = "analyze"
	ttl, _ := time.ParseDuration(fastEnv["LEASE_TTL"])

	r1 := c.startRunner("lg-r1", lgEnv)
	input, _ := json.Marshal(map[string]any{"command": []string{"node", agent}, "dir": dir,
		"env": map[string]string{"STEP_LOG": stepLog, "LONG_STEP": longStep, "LONG_MS": "6000", "STEP_MS": "100"}})
	run := c.submit(`{"id":"lg-paused","thread":"` + thread + `","nodes":[{"id":"agent","kind":"exec","input":` + string(input) + `}]}`)

	var in stepRecord
	waitUntil(t, 60*time.Second, "the agent to start its long step on lg-r1", func() bool {
		for _, r := range readSteps(t, stepLog) {
			if r.Ev == "start" && r.Step == longStep && r.Worker == "lg-r1" {
				in = r
				return true
			}
		}
		return false
	})
	r1.signal(t, syscall.SIGSTOP) // the runner only: its agent runs on
	c.startRunner("lg-r2", lgEnv)

	// The paused agent stops by itself, its runner still stopped.
	var exit stepRecord
	waitUntil(t, 20*time.Second, "the paused agent to exit", func() bool {
		for _, r := range readSteps(t, stepLog) {
			if r.Ev == "exit" && r.Pid == in.Pid {
				exit = r
				return true
			}
		}
		return false
	})
	require.Equal(t, 75, exit.Code, "the paused agent exits with the lost-lease code")
	// It writes "exit" as it leaves, so its process may live a moment
	// longer; it must be gone while its runner is still stopped.
	waitUntil(t, 5*time.Second, "the paused agent to have exited (a zombie until its stopped runner reaps it)", func() bool {
		return zombie(in.Pid)
	})
	waitUntil(t, 20*time.Second, "lg-r2 to take the node over", func() bool {
		return slices.ContainsFunc(c.timedEvents(run), func(e timedEvent) bool { return e.Type == "takeover" })
	})
	r1.signal(t, syscall.SIGCONT)

	require.Equal(t, 0, c.watch(run), "the run succeeds on lg-r2")
	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	require.Equal(t, "lg-r2", st.node("agent").Owner)

	out := pausedRunner{steps: readSteps(t, stepLog), result: st.node("agent").Result, paused: in.Pid,
		exit: time.UnixMilli(exit.T), leaseTTL: ttl, longStep: longStep}
	var takeovers, commits int
	for _, e := range c.timedEvents(run) {
		switch e.Type {
		case "takeover":
			takeovers++
			out.takeover = e.At
			require.Equal(t, "lg-r2", e.Worker)
		case "heartbeat_lost":
			if ms, err := strconv.ParseInt(e.Details["lease_until"], 10, 64); err == nil {
				out.leaseUntil = time.UnixMilli(ms)
			}
		case "committed":
			commits++
			require.Equal(t, "lg-r2", e.Worker)
		case "failed", "retrying", "node_failed":
			t.Fatalf("the lost attempt was recorded as a failure: %+v", e)
		}
	}
	require.Equal(t, 1, takeovers)
	require.Equal(t, 1, commits)
	took := out.exit.Sub(out.takeover)
	require.LessOrEqual(t, took, ttl+time.Second, "the paused agent exits within a lease plus a second of the takeover")

	// The paused agent ran no step after the one it was in.
	for _, r := range out.steps {
		if r.Pid == in.Pid && r.Ev == "start" {
			out.pausedEpochRuns = append(out.pausedEpochRuns, r.Step)
		}
		if r.Pid == in.Pid && r.Ev != "exit" {
			require.LessOrEqual(t, r.T, in.T, "the paused agent started nothing after its long step: %+v", r)
		}
	}
	require.Equal(t, longStep, out.pausedEpochRuns[len(out.pausedEpochRuns)-1])

	// lg-r1, woken, abandons the attempt: no failure, nothing committed.
	waitUntil(t, 20*time.Second, "lg-r1 to abandon the attempt", func() bool {
		return strings.Contains(r1.log.String(), "attempt_abandoned")
	})
	for _, bad := range []string{"attempt_failed", "node_failed"} {
		require.NotContains(t, r1.log.String(), bad)
	}
	t.Logf("paused agent (pid %d, epoch 1) exited 75 %s after its lease ran out and %s after the takeover (lease %s); it had started %v",
		in.Pid, out.exit.Sub(out.leaseUntil).Round(time.Millisecond), took.Round(time.Millisecond), ttl, out.pausedEpochRuns)
	return out
}

// The test that stands for a new user: a graph written as LangGraph's docs
// show, with only checkpointer: BatonSaver.fromEnv() (no durability, no
// signal, no close), run as an exec node whose runner is paused past its
// lease in the middle of a long step. See lgPausedRunner. The graph is
// invoked with its input on every attempt, as the docs' programs do, so
// the new owner runs it from the start; the result holds every step once,
// all computed by the new owner.
func TestLangGraphDocsAgentStopsWhenItsRunnerIsPaused(t *testing.T) {
	t.Parallel()
	got := lgPausedRunner(t, "test/fixtures/docs-agent.mjs", "docs-thread")
	var result map[string]string
	require.NoError(t, json.Unmarshal(got.result, &result), string(got.result))
	require.Equal(t, "fencing", result["topic"])
	for _, s := range []string{"plan", "research", "analyze", "write", "check", "publish"} {
		require.Regexp(t, fmt.Sprintf(`^%s of fencing by epoch 2 pid \d+$`, s), result[s+"Result"])
	}
}

// The same with runNode: the new owner resumes the graph from the paused
// agent's last checkpoint, so the steps checkpointed before the pause are
// kept as the paused agent computed them, and every step is in the result
// exactly once.
func TestLangGraphRunNodeStopsWhenItsRunnerIsPaused(t *testing.T) {
	t.Parallel()
	got := lgPausedRunner(t, "test/fixtures/runnode-agent.mjs", "runnode-thread")
	var result struct {
		Topic string      `json:"topic"`
		Steps []agentStep `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(got.result, &result), string(got.result))
	var names []string
	for _, s := range result.Steps {
		names = append(names, s.Step)
	}
	require.Equal(t, []string{"plan", "research", "analyze", "write", "check", "publish"}, names)
	long := slices.Index(names, got.longStep)
	for i, s := range result.Steps {
		want := int64(2)
		if i < long {
			want = 1 // checkpointed by the paused agent, resumed from, not run again
		}
		require.Equal(t, want, s.Epoch, "step %s", s.Step)
	}
	// Every step ran once on lg-r2, from the long step on: it resumed.
	var second []string
	for _, r := range got.steps {
		if r.Ev == "start" && r.Worker == "lg-r2" {
			second = append(second, r.Step)
		}
	}
	require.Equal(t, names[long:], second)
}
