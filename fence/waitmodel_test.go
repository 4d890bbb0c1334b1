package fence_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
)

// TestWaitModel drives one node through random sequences of claims,
// parks, resumes (resent as after a lost reply, and for old waits),
// commits, final fails, retries and packing, on miniredis, a real
// redis-server and a 3-master Redis Cluster, and checks after every step against a small model:
// a wait is answered at most once (every resume of it answers its first
// answer; one resumed event per wait), a re-run attempt reads no earlier
// answer, and the run stays readable, packed or not.
func TestWaitModel(t *testing.T) {
	t.Parallel()
	for _, be := range modelBackends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(rt *rapid.T) {
				require.NoError(t, flushAll(t.Context(), be.Client))
				m := &waitModel{t: t, tb: &testBundle{be: be, store: fence.New(be.Client, nil), ctx: t.Context()},
					answers: map[string]string{}, state: "READY", status: "RUNNING"}
				m.tb.submit(t, spec("wm", node("ask").attempts(5)))
				rt.Repeat(map[string]func(*rapid.T){
					"claim":  m.claim,
					"park":   m.park,
					"resume": m.resume,
					"commit": m.commit,
					"fail":   m.fail,
					"retry":  m.retry,
					"pack":   m.pack,
					"":       m.check,
				})
			})
		})
	}
}

type waitModel struct {
	t       *testing.T
	tb      *testBundle
	lease   *fence.Claimed
	state   string            // the node's
	status  string            // the run's
	waitID  string            // the wait the node is parked on, or the last one
	waits   []string          // every wait id made
	answers map[string]string // wait id -> its first answer's value
	pending string            // the answer the next attempt reads ("" none)
	retries int
}

func (m *waitModel) claim(rt *rapid.T) {
	if m.state != "READY" {
		rt.Skip("not READY")
	}
	c, err := m.tb.store.Claim(m.tb.ctx, ref("wm", "ask"), "w", longTTL, grace)
	require.NoError(rt, err)
	if m.pending == "" {
		require.Nil(rt, c.Resume, "an attempt with no answer to read")
	} else {
		require.NotNil(rt, c.Resume)
		require.JSONEq(rt, m.pending, string(c.Resume.Value))
	}
	m.lease, m.state = c, "RUNNING"
}

func (m *waitModel) park(rt *rapid.T) {
	if m.state != "RUNNING" {
		rt.Skip("not RUNNING")
	}
	id := fence.NewClaimID()
	w := fence.Wait{ID: id, Request: []byte(`{"ask":"ok?"}`)}
	p, err := m.tb.store.Park(m.tb.ctx, m.lease.Lease, w)
	require.NoError(rt, err)
	if rapid.Bool().Draw(rt, "lostReply") {
		again, err := m.tb.store.Park(m.tb.ctx, m.lease.Lease, w)
		require.NoError(rt, err, "a park resent after a lost reply")
		require.Equal(rt, p, again)
	}
	m.state, m.waitID, m.pending = "WAITING", p.WaitID, ""
	m.waits = append(m.waits, p.WaitID)
}

func (m *waitModel) resume(rt *rapid.T) {
	if len(m.waits) == 0 {
		rt.Skip("no wait yet")
	}
	id := rapid.SampledFrom(m.waits).Draw(rt, "wait")
	value := fmt.Sprintf(`"v%d"`, rapid.IntRange(0, 9).Draw(rt, "value"))
	for send := range 1 + rapid.IntRange(0, 1).Draw(rt, "resends") {
		res, err := m.tb.store.Resume(m.tb.ctx, "wm", "ask", id, json.RawMessage(value), "t")
		first, answered := m.answers[id]
		switch {
		case answered:
			require.NoError(rt, err, "send %d of an answered wait", send)
			require.True(rt, res.Replay)
			require.JSONEq(rt, first, string(res.Answer.Value), "the first answer, always")
		case m.state == "WAITING" && m.waitID == id && m.status == "RUNNING":
			require.NoError(rt, err)
			require.False(rt, res.Replay)
			m.answers[id], m.pending, m.state = value, value, "READY"
		default:
			require.Error(rt, err, "wait %s: never answered, not the node's now", id)
		}
	}
}

func (m *waitModel) commit(rt *rapid.T) {
	if m.state != "RUNNING" {
		rt.Skip("not RUNNING")
	}
	m.tb.commit(m.t, m.lease, `"done"`)
	m.state, m.status = "SUCCEEDED", "SUCCEEDED"
}

func (m *waitModel) fail(rt *rapid.T) {
	if m.state != "RUNNING" {
		rt.Skip("not RUNNING")
	}
	_, err := m.tb.store.Fail(m.tb.ctx, m.lease.Lease, fence.Failure{Err: "no", Final: true}, m.lease.Descendants)
	require.NoError(rt, err)
	m.state, m.status = "FAILED", "FAILED"
}

func (m *waitModel) retry(rt *rapid.T) {
	m.retries++
	res, err := m.tb.store.Retry(m.tb.ctx, "wm", fmt.Sprintf("retry-%d", m.retries), "t")
	switch {
	case m.status == "FAILED":
		require.NoError(rt, err)
		require.Equal(rt, []string{"ask"}, res.Ready)
		m.state, m.status, m.pending = "READY", "RUNNING", ""
	case m.status == "RUNNING" && m.state == "WAITING":
		var open *fence.OpenWaitError
		require.ErrorAs(rt, err, &open, "a run still waiting")
	case m.status == "RUNNING":
		require.NoError(rt, err)
		require.True(rt, res.AlreadyRunning)
	default:
		require.ErrorIs(rt, err, fence.ErrNotRetryable)
	}
}

func (m *waitModel) pack(rt *rapid.T) {
	if m.status == "RUNNING" {
		rt.Skip("the run has not ended")
	}
	_, err := m.tb.store.RetainFinished(m.tb.ctx, time.Hour, 100)
	require.NoError(rt, err)
}

// check: the run reads as the model says, packed or not, and no wait has
// more than one resumed event.
func (m *waitModel) check(rt *rapid.T) {
	info, err := m.tb.store.GetRun(m.tb.ctx, "wm")
	require.NoError(rt, err, "the run stays readable")
	require.Equal(rt, m.status, info.Status)
	require.Equal(rt, m.state, info.Nodes[0].State)
	evs, err := m.tb.store.Events(m.tb.ctx, "wm", "", 0)
	require.NoError(rt, err)
	resumed := map[string]int{}
	for _, e := range evs {
		if e.Type == "resumed" {
			resumed[e.Details["wait_id"]]++
		}
	}
	for id, n := range resumed {
		require.Equal(rt, 1, n, "wait %s answered once", id)
		require.Contains(rt, m.answers, id)
	}
	require.Len(rt, resumed, len(m.answers))
}
