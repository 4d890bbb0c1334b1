package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sh quotes a shell script as an exec node's input.
func sh(script string) string {
	b, _ := json.Marshal(map[string]any{"command": []string{"sh", "-c", script}})
	return string(b)
}

func TestSIGKILLMidDAGLosesNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	// The first node the victim runs marks itself and blocks; every other
	// run of any node is quick.
	step := sh(fmt.Sprintf(`if [ "$RUNNER" = r0 ] && mkdir %q 2>/dev/null; then echo "$BATON_NODE_ID" > %q/node; sleep 300; fi; echo "{\"by\":\"$BATON_EPOCH\"}"`, held, held))
	var nodes []string
	for i := 0; i < 12; i++ {
		deps := ""
		if i >= 3 {
			deps = fmt.Sprintf(`,"deps":["n%d","n%d"]`, i-3, i-2)
		}
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","kind":"exec","input":%s%s}`, i, step, deps))
	}
	victim := c.startRunner("r0", map[string]string{"RUNNER": "r0", "EXEC_ENV": "RUNNER"})
	run := c.submit(`{"id":"killed","nodes":[` + strings.Join(nodes, ",") + `]}`)
	var heldNode []byte
	waitUntil(t, 20*time.Second, "the victim to hold a node", func() bool {
		// The shell creates the file before it writes the id: wait for it.
		heldNode, _ = os.ReadFile(filepath.Join(held, "node"))
		return len(bytes.TrimSpace(heldNode)) > 0
	})
	c.startRunner("r1", nil)
	c.startRunner("r2", nil)
	victim.signal(t, syscall.SIGKILL)

	require.Equal(t, 0, c.watch(run), "watch exits 0 only for a SUCCEEDED run")
	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	committed := map[string]int{}
	var takeover bool
	heldID := strings.TrimSpace(string(heldNode))
	for _, e := range c.events(run) {
		if e.Type == "committed" {
			committed[e.Node]++
			if e.Node == heldID {
				require.NotEqual(t, "r0", e.Worker, "the killed runner's node was committed under its lease")
			}
		}
		if e.Type == "takeover" && e.Node == heldID {
			takeover = true
			require.Equal(t, "r0", e.Details["prev_owner"])
		}
	}
	require.Len(t, committed, 12)
	for n, k := range committed {
		require.Equal(t, 1, k, "node %s committed %d times", n, k)
	}
	require.True(t, takeover, "no takeover of %s", heldNode)
}

func TestSIGTERMDrainsAndAnotherRunnerResumes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	// A long node that checkpoints: the second attempt sees the marker and
	// finishes at once.
	long := sh(fmt.Sprintf(`if [ -f %q ]; then echo '"resumed"'; exit 0; fi; touch %q; sleep 300`, started, started))
	slow := map[string]string{"LEASE_TTL": "60s", "HEARTBEAT_INTERVAL": "5s"} // expiry cannot be what recovers it
	a := c.startRunner("ra", slow)
	run := c.submit(`{"id":"drain","nodes":[{"id":"long","kind":"exec","input":` + long + `}]}`)
	waitUntil(t, 20*time.Second, "the node to start on ra", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	c.startRunner("rb", slow)
	begin := time.Now()
	a.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, a.exitCode(t, 15*time.Second), "a drained runner exits 0")

	require.Equal(t, 0, c.watch(run))
	require.Less(t, time.Since(begin), 30*time.Second, "finished long before the 60s lease could expire")
	st := c.status(run)
	require.Equal(t, "rb", st.node("long").Owner)
	require.JSONEq(t, `"resumed"`, string(st.node("long").Result))
	var released bool
	for _, e := range c.events(run) {
		if e.Type == "released" && e.Worker == "ra" {
			released = true
		}
		require.NotEqual(t, "failed", e.Type, "a drain is not a failed attempt")
	}
	require.True(t, released, "no released event from the drained runner")
}

func TestSIGSTOPPedOwnerResponseIsNeverStored(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var (
		mu       sync.Mutex
		epochs   []string
		first    = make(chan struct{})
		answer1  = make(chan struct{})
		firstHit sync.Once
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		epoch := r.Header.Get("Baton-Epoch")
		mu.Lock()
		epochs = append(epochs, epoch)
		mu.Unlock()
		if epoch == "1" {
			firstHit.Do(func() { close(first) })
			<-answer1 // the first owner's request is answered only after the takeover
		}
		fmt.Fprintf(w, `{"epoch":%s,"token":%q}`, epoch, r.Header.Get("Baton-Fencing-Token"))
	}))
	defer srv.Close()
	defer close(answer1)

	local := map[string]string{"EGRESS_ALLOW": "127.0.0.1"} // the payment service runs here
	a := c.startRunner("ra", local)
	body, _ := json.Marshal(map[string]any{"url": srv.URL, "body": map[string]string{"op": "pay"}})
	run := c.submit(`{"id":"paused","nodes":[{"id":"pay","kind":"http","input":` + string(body) + `}]}`)
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("the http node never reached the server")
	}
	a.signal(t, syscall.SIGSTOP) // paused mid-request, past its lease
	c.startRunner("rb", local)
	waitUntil(t, 30*time.Second, "the takeover to commit", func() bool {
		return c.status(run).Status == "SUCCEEDED"
	})
	answer1 <- struct{}{} // the late response reaches the paused owner
	a.signal(t, syscall.SIGCONT)

	// The stale owner's write is refused: wait for its refusal (or its
	// self-fencing) to be recorded, then check nothing changed.
	waitUntil(t, 20*time.Second, "the stale owner to give up", func() bool {
		return strings.Contains(a.log.String(), "stale_write_rejected") || strings.Contains(a.log.String(), "attempt_abandoned")
	})
	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	var res struct{ Epoch int64 }
	require.NoError(t, json.Unmarshal(st.node("pay").Result, &res))
	require.Equal(t, int64(2), res.Epoch, "the stored result is the new owner's")
	require.Equal(t, int64(2), st.node("pay").Epoch)
	committed := 0
	for _, e := range c.events(run) {
		if e.Type == "committed" {
			committed++
			require.Equal(t, "rb", e.Worker)
		}
	}
	require.Equal(t, 1, committed)
}

func TestCancelKillsTheExecProcessGroup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	c.startRunner("ra", nil)
	run := c.submit(`{"id":"cancelme","nodes":[{"id":"spin","kind":"exec","input":` +
		sh(fmt.Sprintf(`sleep 300 & echo $! > %q; wait`, pidfile)) + `}]}`)
	var pid int
	waitUntil(t, 20*time.Second, "the grandchild to start", func() bool {
		pid = readPid(t, pidfile)
		return pid > 0
	})
	require.True(t, pidAlive(pid))
	_, errOut, code := c.enqueue("", "cancel", run)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, c.watch(run), "watch exits 1 for a run that did not succeed")
	st := c.status(run)
	require.Equal(t, "CANCELLED", st.Status)
	require.Equal(t, "CANCELLED", st.node("spin").State)
	waitUntil(t, 10*time.Second, "the grandchild to be killed", func() bool { return !pidAlive(pid) })
}

// The same drain with several dispatch loops (DISPATCHERS): every loop
// stops fetching, every running node, whichever loop delivered it, is
// released, and the other runner resumes them all.
func TestSIGTERMDrainsEveryDispatchLoop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	const n = 4
	env := map[string]string{"LEASE_TTL": "60s", "HEARTBEAT_INTERVAL": "5s", "DISPATCHERS": "4", "CONCURRENCY": "4"}
	a := c.startRunner("ra", env)
	spec := `{"id":"drain4","nodes":[`
	for i := range n {
		m := filepath.Join(dir, fmt.Sprintf("started%d", i))
		long := sh(fmt.Sprintf(`if [ -f %q ]; then echo '"resumed"'; exit 0; fi; touch %q; sleep 300`, m, m))
		if i > 0 {
			spec += ","
		}
		spec += fmt.Sprintf(`{"id":"long%d","kind":"exec","input":%s}`, i, long)
	}
	run := c.submit(spec + `]}`)
	waitUntil(t, 20*time.Second, "every node to start on ra", func() bool {
		for i := range n {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("started%d", i))); err != nil {
				return false
			}
		}
		return true
	})
	c.startRunner("rb", env)
	begin := time.Now()
	a.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, a.exitCode(t, 15*time.Second), "a drained runner exits 0")

	require.Equal(t, 0, c.watch(run))
	require.Less(t, time.Since(begin), 30*time.Second, "finished long before the 60s lease could expire")
	st := c.status(run)
	released := map[string]bool{}
	for _, e := range c.events(run) {
		if e.Type == "released" && e.Worker == "ra" {
			released[e.Node] = true
		}
	}
	for i := range n {
		id := fmt.Sprintf("long%d", i)
		require.Equal(t, "rb", st.node(id).Owner, id)
		require.JSONEq(t, `"resumed"`, string(st.node(id).Result), id)
		require.True(t, released[id], "%s: no released event from the drained runner", id)
	}
}
