package main

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/chaos/check"
)

// upstream is a line server that counts the requests it ran and answers
// each with "ok <line>".
func upstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var ran atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					ran.Add(1)
					if _, err := c.Write([]byte("ok " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), &ran
}

func roundTrip(t *testing.T, addr, req string, timeout time.Duration) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(req + "\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestProxyFaults(t *testing.T) {
	t.Parallel()
	addr, ran := upstream(t)
	p, err := newProxy(addr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	script := `evalsha abc 1 baton:{t}:node:r:n`

	got, err := roundTrip(t, p.Addr(), script, time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok "+script, got)

	// A lost reply: the request ran, the caller hears nothing.
	p.LoseReplies(time.Minute)
	before := ran.Load()
	_, err = roundTrip(t, p.Addr(), script, time.Second)
	require.Error(t, err)
	require.Eventually(t, func() bool { return ran.Load() == before+1 }, time.Second, 5*time.Millisecond)
	got, err = roundTrip(t, p.Addr(), "get asynq:{default}:x", time.Second)
	require.NoError(t, err, "only baton script calls lose their replies")
	require.Equal(t, "ok get asynq:{default}:x", got)
	p.Heal()

	// A stall delivers late; a blackhole never.
	go p.Stall(300 * time.Millisecond)
	time.Sleep(20 * time.Millisecond) // let the stall begin
	start := time.Now()
	got, err = roundTrip(t, p.Addr(), "ping", 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok ping", got)
	require.Greater(t, time.Since(start), 200*time.Millisecond)

	before = ran.Load()
	go p.Blackhole(300 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	_, err = roundTrip(t, p.Addr(), "ping", 2*time.Second)
	require.Error(t, err)
	require.Equal(t, before, ran.Load(), "nothing crossed the blackhole")
}

// The same seed names the same schedule, and process faults never hit the
// last free runner.
func TestPlanIsSeededAndLeavesARunner(t *testing.T) {
	t.Parallel()
	a := plan(7, 5*time.Minute, []int{0, 0, 0}, defaultTiming)
	require.Equal(t, a, plan(7, 5*time.Minute, []int{0, 0, 0}, defaultTiming))
	require.NotEqual(t, a, plan(8, 5*time.Minute, []int{0, 0, 0}, defaultTiming))
	require.Greater(t, len(a), 100)
	kinds := map[string]int{}
	for _, p := range a {
		kinds[p.kind]++
		require.LessOrEqual(t, p.at+p.dur, 5*time.Minute)
	}
	require.Len(t, kinds, 9, "every kind is drawn: %v", kinds)
}

// With agent workers beside the runners, a process fault never takes the
// last free slot of either class: the conversations' Go nodes always have
// a worker.
func TestPlanLeavesAWorkerOfEachClass(t *testing.T) {
	t.Parallel()
	classes := []int{0, 0, 0, 1, 1}
	for _, seed := range []uint64{7, 11, 42} {
		sched := plan(seed, 5*time.Minute, classes, defaultTiming)
		var agentFaults []planned
		for _, p := range sched {
			if (p.kind == check.KindStop || p.kind == check.KindKill || p.kind == check.KindTerm) && classes[p.target] == 1 {
				agentFaults = append(agentFaults, p)
			}
		}
		require.NotEmpty(t, agentFaults, "seed %d: agents are faulted too", seed)
		for i := 1; i < len(agentFaults); i++ {
			prev := agentFaults[i-1]
			require.GreaterOrEqual(t, agentFaults[i].at, prev.at+prev.dur+defaultTiming.Shutdown+time.Second,
				"seed %d: two agent workers faulted at once", seed)
		}
	}
}
