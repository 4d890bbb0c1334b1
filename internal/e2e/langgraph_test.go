package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// lgEnv trusts node, the agents' command, with the runner's Redis: their
// baton saver keeps fenced checkpoints there (BATON_REDIS_URL).
var lgEnv = map[string]string{"EXEC_STORE_COMMANDS": "node"}

// lgPackage is js. Without node 20+ and its installed
// packages the LangGraph test skips, or fails when BATON_REQUIRE_NODE is set
// (CI sets it after npm ci).
func lgPackage(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "js")
	missing := func(why string) {
		if os.Getenv("BATON_REQUIRE_NODE") != "" {
			t.Fatalf("BATON_REQUIRE_NODE is set but %s", why)
		}
		t.Skip(why)
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		missing("node is not installed")
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < 20 {
		missing(fmt.Sprintf("node %s is older than 20", strings.TrimSpace(string(out))))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph")); err != nil {
		missing("js has no node_modules: run npm ci there")
	}
	return dir
}

// agentStep is one entry of the agent's "steps": who computed that step.
type agentStep struct {
	Step   string `json:"step"`
	Epoch  int64  `json:"epoch"`
	Worker string `json:"worker"`
	Pid    int    `json:"pid"`
}

// agentSteps reads the steps of the thread's newest LangGraph checkpoint
// (BatonSaver keeps {"serde":"json","value":checkpoint}).
func agentSteps(t *testing.T, cp *fence.Checkpoint) []agentStep {
	t.Helper()
	var env struct {
		Value struct {
			ChannelValues struct {
				Steps []agentStep `json:"steps"`
			} `json:"channel_values"`
		} `json:"value"`
	}
	require.NoError(t, json.Unmarshal(cp.Data, &env), string(cp.Data))
	return env.Value.ChannelValues.Steps
}

// childOf returns the pid of a child of parent whose command is comm.
func childOf(parent int, comm string) int {
	names, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) >= 2 && string(b[open+1:end]) == comm && f[1] == strconv.Itoa(parent) {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			return pid
		}
	}
	return 0
}

// The LangGraph agent of js runs as an exec node. Its
// worker (the runner and the agent's process group) is paused mid-graph past
// its lease; another runner takes the node over and the graph resumes from
// its last checkpoint, not from scratch; the paused agent, woken, stops:
// its late write is refused (stale_rejected), or its claim watch reads
// first that the node is no longer its own. The final state is computed
// once, from the resumed checkpoint, and committed once.
func TestLangGraphAgentResumesAfterTakeover(t *testing.T) {
	t.Parallel()
	dir := lgPackage(t)
	c := newCluster(t)
	store := fence.New(c.redis.Client(t), nil)
	ctx := t.Context()
	begin := time.Now()
	var timeline []string
	mark := func(who, what string) {
		timeline = append(timeline, fmt.Sprintf("%+9.3fs  %-8s %s", time.Since(begin).Seconds(), who, what))
	}

	r1 := c.startRunner("lg-r1", lgEnv)
	input, _ := json.Marshal(map[string]any{"command": []string{"node", "agent.mjs"}, "dir": dir,
		"env": map[string]string{"AGENT_STEP_MS": "500"}})
	run := c.submit(`{"id":"lg-agent","thread":"lg-thread","nodes":[{"id":"agent","kind":"exec","input":` + string(input) + `}]}`)
	latest := func() *fence.Checkpoint {
		cp, err := store.LatestCheckpoint(ctx, "lg-thread", "")
		if err != nil {
			return nil
		}
		return cp
	}
	waitUntil(t, 60*time.Second, "the agent to checkpoint a step on lg-r1", func() bool {
		cp := latest()
		return cp != nil && len(agentSteps(t, cp)) >= 1
	})
	agent := childOf(r1.cmd.Process.Pid, "node")
	require.NotZero(t, agent, "the agent process of lg-r1")
	r1.signal(t, syscall.SIGSTOP)
	require.NoError(t, syscall.Kill(-agent, syscall.SIGSTOP)) // its process group: the whole worker is paused
	paused := agentSteps(t, latest())
	mark("lg-r1", fmt.Sprintf("(paused)  runner and agent SIGSTOPped after %d steps, checkpoint %s", len(paused), latest().ID))

	c.startRunner("lg-r2", lgEnv)
	require.Equal(t, 0, c.watch(run), "the run succeeds on lg-r2")
	mark("lg-r2", "(done)    run SUCCEEDED")
	final := latest()
	st := c.status(run)

	// Wake the agent first, so that it, not its runner, finds out: either
	// its overdue step finishes and its next write is refused, or its claim
	// watch reads first that the node was taken over. Both stop it (exit 75)
	// without changing anything.
	require.NoError(t, syscall.Kill(-agent, syscall.SIGCONT))
	mark("lg-r1", "(resumed) agent SIGCONT")
	waitUntil(t, 20*time.Second, "the paused agent to stop", func() bool { return !pidAlive(agent) || zombie(agent) })
	r1.signal(t, syscall.SIGCONT)
	mark("lg-r1", "(resumed) runner SIGCONT")
	waitUntil(t, 20*time.Second, "lg-r1 to give the node up", func() bool {
		return strings.Contains(r1.log.String(), "stale_write_rejected") || strings.Contains(r1.log.String(), "attempt_abandoned") ||
			strings.Contains(r1.log.String(), "lease_lost")
	})

	// Nothing the paused worker did afterwards changed the thread or the run.
	after := latest()
	require.Equal(t, final.Version, after.Version, "no checkpoint after the run's end")
	require.Equal(t, final.ID, after.ID)
	require.Equal(t, int64(2), after.Epoch, "the newest checkpoint is the new owner's")
	require.Equal(t, "lg-r2", after.Worker)
	st2 := c.status(run)
	require.Equal(t, "SUCCEEDED", st2.Status)
	require.JSONEq(t, string(st.node("agent").Result), string(st2.node("agent").Result))
	require.Equal(t, int64(2), st2.node("agent").Epoch)
	require.Equal(t, "lg-r2", st2.node("agent").Owner)

	// The graph resumed from the paused worker's last checkpoint: the steps
	// it had checkpointed are not run again, every step ran once, and the
	// result is the state of the final checkpoint.
	var result struct {
		Steps   []agentStep `json:"steps"`
		Summary string      `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(st2.node("agent").Result, &result))
	var names []string
	for _, s := range result.Steps {
		names = append(names, s.Step)
	}
	require.Equal(t, []string{"plan", "research", "analyze", "write", "check", "publish"}, names)
	all, _, err := store.Checkpoints(ctx, "lg-thread", "", 0, 100)
	require.NoError(t, err)
	i := slices.IndexFunc(all, func(cp fence.Checkpoint) bool { return cp.Epoch == 1 }) // newest first
	require.GreaterOrEqual(t, i, 0)
	resumedFrom := agentSteps(t, &all[i])
	require.GreaterOrEqual(t, len(resumedFrom), len(paused), "checkpoints are never lost")
	require.Less(t, len(resumedFrom), len(names), "the takeover came before the graph's end")
	require.Equal(t, resumedFrom, result.Steps[:len(resumedFrom)], "the steps checkpointed by epoch 1 are kept as they were")
	for _, s := range result.Steps[len(resumedFrom):] {
		require.Equal(t, int64(2), s.Epoch, "step %s after the last epoch-1 checkpoint is computed by the new owner", s.Step)
		require.Equal(t, "lg-r2", s.Worker)
	}
	require.Equal(t, result.Steps, agentSteps(t, after))
	require.Equal(t, "fencing: approved, 84 chars", result.Summary)

	evs := c.events(run)
	var takeover, committed int
	var rejected []string
	for _, e := range evs {
		switch e.Type {
		case "takeover":
			takeover++
			require.Equal(t, "lg-r1", e.Details["prev_owner"])
			require.Equal(t, "lg-r2", e.Worker)
		case "committed":
			committed++
			require.Equal(t, "lg-r2", e.Worker)
		case "stale_rejected":
			require.Equal(t, "lg-r1", e.Worker)
			require.Equal(t, int64(1), e.Epoch)
			rejected = append(rejected, e.Details["op"])
		case "checkpointed":
			if e.Epoch == 1 {
				require.Equal(t, "lg-r1", e.Worker)
			}
		}
	}
	require.Equal(t, 1, takeover)
	require.Equal(t, 1, committed, "the final state is committed once")
	t.Logf("refused writes of the paused worker: %v", rejected)

	timeline = append(timeline, lgTimeline(t, c, run, begin)...)
	slices.Sort(timeline)
	t.Logf("timeline:\n%s", strings.Join(timeline, "\n"))
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// lgTimeline renders the run's events on the test's clock, like make demo.
func lgTimeline(t *testing.T, c *cluster, run string, begin time.Time) []string {
	t.Helper()
	out, _, code := c.enqueue("", "events", run, "--json")
	require.Equal(t, 0, code)
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type    string            `json:"type"`
			Epoch   int64             `json:"epoch"`
			Worker  string            `json:"worker"`
			At      time.Time         `json:"at"`
			Details map[string]string `json:"details"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		var keys []string
		for k := range e.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var details []string
		for _, k := range keys {
			details = append(details, k+"="+e.Details[k])
		}
		lines = append(lines, fmt.Sprintf("%+9.3fs  %-8s e%d  %-15s %s", e.At.Sub(begin).Seconds(), cmp.Or(e.Worker, "-"),
			e.Epoch, e.Type, strings.Join(details, " ")))
	}
	return lines
}
