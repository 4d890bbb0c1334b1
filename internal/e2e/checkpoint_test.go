package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// checkpointLine is `enqueue checkpoint --json` decoded.
type checkpointLine struct {
	Version int64           `json:"version"`
	ID      string          `json:"id"`
	Data    json.RawMessage `json:"data"`
	Run     string          `json:"run"`
	Node    string          `json:"node"`
	Epoch   int64           `json:"epoch"`
	Worker  string          `json:"worker"`
	At      time.Time       `json:"at"`
}

// checkpoints reads the thread's checkpoints in ns through the CLI: the
// newest, or with all every one kept, newest first. None: nil.
func (c *cluster) checkpoints(thread, ns string, all bool) []checkpointLine {
	c.t.Helper()
	args := []string{"checkpoint", thread, "--ns", ns, "--json"}
	if all {
		args = append(args, "--all")
	}
	out, errOut, code := c.enqueue("", args...)
	if code == 1 && strings.Contains(errOut, "no checkpoint") {
		return nil
	}
	require.Equal(c.t, 0, code, "checkpoint: %s", errOut)
	var list []checkpointLine
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var cp checkpointLine
		require.NoError(c.t, json.Unmarshal([]byte(line), &cp), line)
		list = append(list, cp)
	}
	return list
}

// step is the "step" of a checkpoint's data.
func step(t *testing.T, cp checkpointLine) int64 {
	t.Helper()
	var d struct{ Step int64 }
	require.NoError(t, json.Unmarshal(cp.Data, &d), "%s", cp.Data)
	return d.Step
}

// stepper is an exec node that counts steps, saving each as a checkpoint,
// and starts from the step in $BATON_CHECKPOINT_FILE when there is one.
// The first owner (epoch 1) steps slowly; later ones quickly. Its result
// says where the attempt started.
func stepper(last int) string {
	return sh(fmt.Sprintf(`
		start=0
		if [ -n "$BATON_CHECKPOINT_FILE" ]; then start=$(sed 's/[^0-9]//g' "$BATON_CHECKPOINT_FILE"); fi
		delay=0.2; [ "$BATON_EPOCH" = 1 ] || delay=0.01
		i=$start
		while [ $i -lt %d ]; do
			i=$((i+1))
			echo "::checkpoint {\"step\": $i}"
			sleep $delay
		done
		echo "{\"from\": $start, \"to\": $i, \"epoch\": $BATON_EPOCH, \"thread\": \"$BATON_THREAD_ID\"}"`, last))
}

// A runner paused (SIGSTOP) past its lease while its exec node saves
// checkpoints, then resumed (SIGCONT) after another runner took the node
// over and finished it: nothing it saves after the takeover is accepted,
// the checkpoint it had in flight when it stopped reaches Redis after the
// takeover and is refused (stale_rejected, op=checkpoint), the newest
// checkpoint is the new owner's, and the new owner's attempt started from
// the last checkpoint the paused one saved.
//
// ra reaches Redis through a proxy that holds its bytes from just before
// the pause until after the takeover: the save it sent as it stopped
// arrives late, as over a slow link. (Without the hold, Redis would run
// that save at once, before the takeover; and on SIGCONT ra's own clock
// tells it first that its lease can no longer be trusted, so it sends
// nothing more: the lines its child printed while it was stopped are
// dropped, not saved.)
func TestPausedRunnerCannotWriteStaleCheckpoints(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	link := newHoldProxy(t, c.redis.Addr())
	a := c.startRunner("ra", map[string]string{"REDIS_URL": "redis://" + link.addr() + "/0"})
	const last = 60 // the history (100 per namespace) keeps every step
	run := c.submit(`{"id": "stepping", "thread": "conv", "nodes": [{"id": "work", "kind": "exec", "input": ` + stepper(last) + `}]}`)
	waitUntil(t, 20*time.Second, "ra to save a few steps", func() bool {
		cps := c.checkpoints("conv", "work", false)
		return len(cps) == 1 && step(t, cps[0]) >= 3
	})
	link.hold()
	waitUntil(t, 10*time.Second, "ra to send its next checkpoint", link.holdsCheckpoint)
	a.signal(t, syscall.SIGSTOP) // a GC pause, a frozen VM: ra's child goes on printing into the pipe
	c.startRunner("rb", nil)
	waitUntil(t, 30*time.Second, "rb to take over and finish", func() bool {
		return c.status(run).Status == "SUCCEEDED"
	})
	link.release() // ra's late save reaches Redis
	waitUntil(t, 10*time.Second, "ra's late checkpoint to be refused", func() bool {
		for _, e := range c.events(run) {
			if e.Type == "stale_rejected" && e.Worker == "ra" && e.Details["op"] == "checkpoint" {
				return true
			}
		}
		return false
	})
	a.signal(t, syscall.SIGCONT)
	waitUntil(t, 20*time.Second, "ra to give the node up", func() bool {
		return strings.Contains(a.log.String(), "attempt_abandoned")
	})

	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	require.Equal(t, "rb", st.node("work").Owner)
	require.Equal(t, int64(2), st.node("work").Epoch)
	var res struct {
		From, To, Epoch int64
		Thread          string
	}
	require.NoError(t, json.Unmarshal(st.node("work").Result, &res))
	require.Equal(t, "conv", res.Thread)
	require.Equal(t, int64(2), res.Epoch)
	require.Equal(t, int64(last), res.To)

	// The history: ra's steps 1..k, then rb's k+1..last, nothing of ra's
	// after its pause.
	hist := c.checkpoints("conv", "work", true)
	require.Len(t, hist, last, "one checkpoint per step, none twice")
	var lastByRA int64
	for i, cp := range hist {
		require.Equal(t, int64(last-i), cp.Version, "newest first")
		require.Equal(t, cp.Version, step(t, cp), "version %d holds step %d: no step saved twice or skipped", cp.Version, step(t, cp))
		require.Equal(t, run, cp.Run)
		require.Equal(t, "work", cp.Node)
		if cp.Epoch == 1 {
			require.Equal(t, "ra", cp.Worker)
			lastByRA = max(lastByRA, step(t, cp))
		} else {
			require.Equal(t, int64(2), cp.Epoch)
			require.Equal(t, "rb", cp.Worker)
		}
	}
	require.GreaterOrEqual(t, lastByRA, int64(3))
	require.Equal(t, lastByRA, res.From, "rb resumed from the last checkpoint ra saved")
	newest := c.checkpoints("conv", "work", false)[0]
	require.Equal(t, int64(2), newest.Epoch, "the newest checkpoint is the new owner's")
	require.Equal(t, int64(last), step(t, newest))

	// In the event stream (Redis's order): after the takeover, nothing of
	// ra's was accepted; what it tried was refused.
	var takeover bool
	var refused int
	for _, e := range c.events(run) {
		switch {
		case e.Type == "takeover":
			takeover = true
			require.Equal(t, "ra", e.Details["prev_owner"])
		case e.Worker == "ra" && takeover:
			require.Equal(t, "stale_rejected", e.Type, "ra's %s after the takeover", e.Type)
			require.Equal(t, int64(1), e.Epoch)
			if e.Details["op"] == "checkpoint" {
				refused++
			}
		case e.Type == "checkpointed" && !takeover:
			require.Equal(t, "ra", e.Worker)
		}
	}
	require.True(t, takeover)
	require.Positive(t, refused, "ra's late checkpoint was refused by the store")
	t.Logf("ra's checkpoints refused after the takeover: %d; ra's last accepted step %d; rb resumed from %d", refused, lastByRA, res.From)
}

// holdProxy forwards TCP between a runner and Redis. While held, a
// connection that sends a request touching a thread's keys ("baton:{",
// the node's scripts: heartbeats, checkpoints, commits) waits, and what it
// sent is delivered on release, in order, late. Other traffic (connection
// set-up, the queue) flows, so a new connection can still carry a save.
type holdProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	held  bool
	cond  *sync.Cond
	bytes []byte // everything sent while held, for holdsCheckpoint
}

func newHoldProxy(t *testing.T, upstream string) *holdProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdProxy{ln: ln, upstream: upstream}
	p.cond = sync.NewCond(&p.mu)
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			open = append(open, client, server)
			mu.Unlock()
			conns.Add(2)
			go func() { defer conns.Done(); p.pump(server, client, true) }()
			go func() { defer conns.Done(); p.pump(client, server, false) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.release()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

// pump copies src to dst; a request (client to server) waits while held.
func (p *holdProxy) pump(dst, src net.Conn, request bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && request && bytes.Contains(buf[:n], []byte("baton:{")) {
			p.mu.Lock()
			if p.held {
				p.bytes = append(p.bytes, buf[:n]...)
			}
			for p.held {
				p.cond.Wait()
			}
			p.mu.Unlock()
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held, p.bytes = true, nil
}

func (p *holdProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	p.cond.Broadcast()
}

// holdsCheckpoint reports whether a checkpoint save (a script call over a
// checkpoint namespace key) is among the held requests.
func (p *holdProxy) holdsCheckpoint() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.bytes, []byte(":cpv:"))
}

// SIGTERM to a runner whose exec node traps TERM, saves a last checkpoint
// and exits non-zero: the node is released, not failed, and another runner
// resumes it at once from that checkpoint.
func TestShutdownCheckpointIsWhereTheNextRunnerResumes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	started := filepath.Join(t.TempDir(), "started")
	node := sh(fmt.Sprintf(`
		start=0
		if [ -n "$BATON_CHECKPOINT_FILE" ]; then start=$(sed 's/[^0-9]//g' "$BATON_CHECKPOINT_FILE"); fi
		if [ "$BATON_EPOCH" != 1 ]; then
			echo "{\"from\": $start, \"thread\": \"$BATON_THREAD_ID\", \"epoch\": $BATON_EPOCH}"
			exit 0
		fi
		i=0
		trap 'echo "::checkpoint {\"step\": $i, \"final\": true}"; exit 3' TERM
		touch %q
		while :; do i=$((i+1)); sleep 0.05; done`, started))
	slow := map[string]string{"LEASE_TTL": "60s", "HEARTBEAT_INTERVAL": "5s"} // expiry cannot be what recovers it
	a := c.startRunner("ra", slow)
	run := c.submit(`{"id": "drained", "nodes": [{"id": "long", "kind": "exec", "input": ` + node + `}]}`)
	waitUntil(t, 20*time.Second, "the node to start on ra", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	require.Nil(t, c.checkpoints(run, "long", false), "nothing saved before the signal")
	c.startRunner("rb", slow)
	begin := time.Now()
	a.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, a.exitCode(t, 15*time.Second), "a drained runner exits 0")

	require.Equal(t, 0, c.watch(run))
	require.Less(t, time.Since(begin), 30*time.Second, "resumed long before the 60s lease could expire")
	cps := c.checkpoints(run, "long", true)
	require.Len(t, cps, 1, "the checkpoint the TERM trap printed")
	final := cps[0]
	require.Equal(t, "ra", final.Worker)
	require.Equal(t, int64(1), final.Epoch)
	var data struct {
		Step  int64
		Final bool
	}
	require.NoError(t, json.Unmarshal(final.Data, &data))
	require.True(t, data.Final)
	require.Positive(t, data.Step)

	st := c.status(run)
	require.Equal(t, "rb", st.node("long").Owner)
	require.JSONEq(t, fmt.Sprintf(`{"from": %d, "thread": %q, "epoch": 2}`, data.Step, run), string(st.node("long").Result),
		"rb resumed from ra's last checkpoint; a run without a thread is its own thread")
	var released, checkpointedFirst bool
	for _, e := range c.events(run) {
		require.NotEqual(t, "failed", e.Type, "a drain is not a failed attempt")
		require.NotEqual(t, "stale_rejected", e.Type)
		if e.Type == "checkpointed" && e.Worker == "ra" && !released {
			checkpointedFirst = true
		}
		if e.Type == "released" && e.Worker == "ra" {
			released = true
		}
	}
	require.True(t, released, "no released event from the drained runner")
	require.True(t, checkpointedFirst, "the last checkpoint was stored before the release")
}
