package fence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// failFinal fails c's attempt for good, as the runner does when a wait
// timed out with on_timeout "fail".
func (tb *testBundle) failFinal(t *testing.T, c *fence.Claimed, msg string) fence.Ended {
	t.Helper()
	end, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: msg, Final: true}, c.Descendants)
	require.NoError(t, err)
	return end
}

// A retried run asks again: neither a wait's timed-out answer (on_timeout
// "fail") nor an approval given to an earlier try reaches the re-run
// attempt, which parks and waits for a new answer. A resume of the
// earlier wait, resent after the retry, still answers as the first time.
func TestRetryClearsWaitAnswers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, checkRetryClearsWaitAnswers)
}

func checkRetryClearsWaitAnswers(t *testing.T, tb *testBundle) {
	// Timed out, on_timeout "fail": the next attempt fails at once.
	tb.submit(t, spec("rw-timeout", node("ask").attempts(1)))
	c := tb.claim(t, "rw-timeout", "ask", "w1", longTTL)
	_, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"ok?"}`),
		Timeout: 100 * time.Millisecond, OnTimeout: "fail"})
	require.NoError(t, err)
	tb.advance(t, 150*time.Millisecond)
	timedOut, err := tb.store.TimeOutWaits(tb.ctx, "sweeper", 100)
	require.NoError(t, err)
	require.Len(t, timedOut, 1)
	c = tb.claim(t, "rw-timeout", "ask", "w1", longTTL)
	require.NotNil(t, c.Resume)
	require.NotEmpty(t, c.Resume.Error)
	require.Equal(t, "FAILED", tb.failFinal(t, c, "wait timed out").RunStatus)

	_, err = tb.store.Retry(tb.ctx, "rw-timeout", "retry-1", "test")
	require.NoError(t, err)
	require.Nil(t, tb.nodeInfo(t, "rw-timeout", "ask").Wait)
	c = tb.claim(t, "rw-timeout", "ask", "w1", longTTL)
	require.Nil(t, c.Resume, "the re-run attempt runs: the timed-out answer was its earlier try's")

	// Approved, then the attempt failed: the retry asks again.
	tb.submit(t, spec("rw-approved", node("ask").attempts(1)))
	c = tb.claim(t, "rw-approved", "ask", "w1", longTTL)
	p, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"deploy?"}`)})
	require.NoError(t, err)
	_, err = tb.store.Resume(tb.ctx, "rw-approved", "ask", p.WaitID, []byte(`"yes"`), "alice")
	require.NoError(t, err)
	c = tb.claim(t, "rw-approved", "ask", "w1", longTTL)
	require.NotNil(t, c.Resume)
	require.JSONEq(t, `"yes"`, string(c.Resume.Value))
	require.Equal(t, "FAILED", tb.failFinal(t, c, "deploy failed").RunStatus)

	_, err = tb.store.Retry(tb.ctx, "rw-approved", "retry-1", "test")
	require.NoError(t, err)
	c = tb.claim(t, "rw-approved", "ask", "w1", longTTL)
	require.Nil(t, c.Resume, "the approval was given to the earlier try")
	again, err := tb.store.Resume(tb.ctx, "rw-approved", "ask", p.WaitID, []byte(`"no"`), "bob")
	require.NoError(t, err, "the first resume, resent after the retry")
	require.True(t, again.Replay)
	require.JSONEq(t, `"yes"`, string(again.Answer.Value))
	require.Empty(t, again.Queue, "nothing to deliver: the answer is not the node's now")

	second, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"deploy again?"}`)})
	require.NoError(t, err)
	require.NotEqual(t, p.WaitID, second.WaitID)
	res, err := tb.store.Resume(tb.ctx, "rw-approved", "ask", "", []byte(`"again"`), "alice")
	require.NoError(t, err)
	require.False(t, res.Replay)
	c = tb.claim(t, "rw-approved", "ask", "w1", longTTL)
	require.JSONEq(t, `"again"`, string(c.Resume.Value), "the new answer, to the new wait")
}

// A resume resent after anything that came later answers as the first
// time ("already", the first answer): after the node parked again on a
// new wait, and after its run ended and the retention packed it.
func TestResumeResentAfterLaterEvents(t *testing.T) {
	t.Parallel()
	forEachBackend(t, checkResumeResentAfterLaterEvents)
}

func checkResumeResentAfterLaterEvents(t *testing.T, tb *testBundle) {
	tb.submit(t, spec("rr", node("ask")))
	c := tb.claim(t, "rr", "ask", "w1", longTTL)
	first, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`1`)})
	require.NoError(t, err)
	_, err = tb.store.Resume(tb.ctx, "rr", "ask", first.WaitID, []byte(`"one"`), "alice")
	require.NoError(t, err)
	c = tb.claim(t, "rr", "ask", "w1", longTTL)
	second, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`2`)})
	require.NoError(t, err)

	again, err := tb.store.Resume(tb.ctx, "rr", "ask", first.WaitID, []byte(`"late"`), "alice")
	require.NoError(t, err, "the first resume, resent once the node parked again")
	require.True(t, again.Replay)
	require.Equal(t, fence.Answer{Wait: first.WaitID, Value: json.RawMessage(`"one"`)}, again.Answer)
	require.Empty(t, again.Queue)
	n := tb.nodeInfo(t, "rr", "ask")
	require.Equal(t, "WAITING", n.State, "the resent resume changed nothing")
	require.Equal(t, second.WaitID, n.Wait.ID)

	_, err = tb.store.Resume(tb.ctx, "rr", "ask", second.WaitID, []byte(`"two"`), "alice")
	require.NoError(t, err)
	c = tb.claim(t, "rr", "ask", "w1", longTTL)
	require.Equal(t, "SUCCEEDED", tb.commit(t, c, `"done"`).RunStatus)
	packed, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, 1, packed)
	gone, err := tb.be.Client.Exists(tb.ctx, tb.store.Keys().Node("rr", "rr", "ask")).Result()
	require.NoError(t, err)
	require.Zero(t, gone, "packed")

	for _, w := range []struct{ id, value string }{{first.WaitID, `"one"`}, {second.WaitID, `"two"`}} {
		again, err = tb.store.Resume(tb.ctx, "rr", "ask", w.id, []byte(`"late"`), "alice")
		require.NoError(t, err, "wait %s, resent once the run was packed", w.id)
		require.True(t, again.Replay)
		require.Equal(t, fence.Answer{Wait: w.id, Value: json.RawMessage(w.value)}, again.Answer)
	}
	_, err = tb.store.Resume(tb.ctx, "rr", "ask", "never", []byte(`1`), "alice")
	require.ErrorIs(t, err, fence.ErrRunDone, "a wait never answered, in a packed run")
	_, err = tb.store.Resume(tb.ctx, "rr", "nope", "", []byte(`1`), "alice")
	require.ErrorIs(t, err, fence.ErrUnknownNode)
	require.Equal(t, "SUCCEEDED", tb.getRun(t, "rr").Status, "still readable")
}

// Bad input changes nothing and says what was wrong: a resume naming a
// node the run lacks, a resume with another node's wait id, a resume of a
// cancelled run, a retry of a run one of whose nodes still waits.
func TestWaitBadInput(t *testing.T) {
	t.Parallel()
	forEachBackend(t, checkWaitBadInput)
}

func checkWaitBadInput(t *testing.T, tb *testBundle) {
	tb.submit(t, spec("wb", node("a"), node("b")))
	ca := tb.claim(t, "wb", "a", "w1", longTTL)
	pa, err := tb.store.Park(tb.ctx, ca.Lease, fence.Wait{Request: []byte(`"a?"`)})
	require.NoError(t, err)
	cb := tb.claim(t, "wb", "b", "w1", longTTL)
	pb, err := tb.store.Park(tb.ctx, cb.Lease, fence.Wait{Request: []byte(`"b?"`)})
	require.NoError(t, err)
	before := tb.getRun(t, "wb")
	evs := len(tb.events(t, "wb"))

	_, err = tb.store.Resume(tb.ctx, "wb", "nope", "", []byte(`1`), "t")
	require.ErrorIs(t, err, fence.ErrUnknownNode)
	require.ErrorIs(t, err, fence.ErrNotFound)
	require.Contains(t, err.Error(), "no node nope")

	_, err = tb.store.Resume(tb.ctx, "wb", "a", pb.WaitID, []byte(`1`), "t")
	require.ErrorIs(t, err, fence.ErrInvalidData)
	require.Contains(t, err.Error(), "wait_id")
	require.Contains(t, err.Error(), "node b")

	_, err = tb.store.Retry(tb.ctx, "wb", "r1", "t")
	var open *fence.OpenWaitError
	require.ErrorAs(t, err, &open)
	require.ErrorIs(t, err, fence.ErrNotRetryable)
	require.Equal(t, "a", open.Node)
	require.Equal(t, pa.WaitID, open.WaitID)

	require.Equal(t, before, tb.getRun(t, "wb"), "nothing stored changed")
	require.Len(t, tb.events(t, "wb"), evs)

	_, err = tb.store.Cancel(tb.ctx, "wb", "stop", "t")
	require.NoError(t, err)
	_, err = tb.store.Resume(tb.ctx, "wb", "a", pa.WaitID, []byte(`1`), "t")
	require.ErrorIs(t, err, fence.ErrRunDone)
	require.ErrorIs(t, err, fence.ErrRunCancelled)
}
