package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// errReplyLost is what a caller sees when the network lost a reply after
// Redis ran the command.
var errReplyLost = errors.New("test: reply lost after the script ran")

// replyDropper is a go-redis hook that lets a script run in Redis and then
// loses its reply, as a proxy dropping a response would: the script's effect
// is stored, the caller hears only an error.
type replyDropper struct {
	names map[string]string // script SHA1 -> name

	mu   sync.Mutex
	drop map[string]int // name -> replies still to lose
	skip map[string]int // name -> calls to answer before losing any
}

func newReplyDropper(t *testing.T) *replyDropper {
	t.Helper()
	d := &replyDropper{names: redistest.ScriptNames(t), drop: map[string]int{}, skip: map[string]int{}}
	return d
}

// lossyStore is a store on its own connection to tb's Redis whose script
// replies dropper loses on demand; go-redis does not retry them.
func (tb *testBundle) lossyStore(t *testing.T) (*replyDropper, *fence.Store) {
	t.Helper()
	dropper := newReplyDropper(t)
	var lossy redis.UniversalClient
	switch c := tb.be.Client.(type) {
	case *redis.ClusterClient:
		o := *c.Options()
		o.MaxRetries, o.MaxRedirects = -1, 3 // a redirect is not a retry: it ran nothing
		cc := redis.NewClusterClient(&o)
		cc.AddHook(dropper)
		lossy = cc
	default:
		rc := redis.NewClient(&redis.Options{Addr: c.(*redis.Client).Options().Addr, MaxRetries: -1})
		rc.AddHook(dropper)
		lossy = rc
	}
	t.Cleanup(func() { _ = lossy.Close() })
	return dropper, fence.New(lossy, nil)
}

// loseNext makes the next n calls of script lose their replies.
func (d *replyDropper) loseNext(script string, n int) { d.loseAfter(script, 0, n) }

// loseAfter lets skip calls of script answer, then loses the replies of
// the n after them: the second call of an operation that calls its script
// again with more keys (a claim or cancel of a node with limits, whose
// first call answers -31).
func (d *replyDropper) loseAfter(script string, skip, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.skip[script] += skip
	d.drop[script] += n
}

func (d *replyDropper) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *replyDropper) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if d.lose(cmd, cmd.Err()) {
				err = errReplyLost
			}
		}
		return err
	}
}

func (d *replyDropper) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if d.lose(cmd, err) {
			return errReplyLost
		}
		return err
	}
}

// lose replaces cmd's reply with errReplyLost if cmd ran a script whose
// next reply is to be lost: an EVALSHA, or the EVAL that follows an
// EVALSHA answered NOSCRIPT (which ran nothing). err is what processing
// cmd returned: a hook may see NOSCRIPT there before cmd.Err() says so.
func (d *replyDropper) lose(cmd redis.Cmder, err error) bool {
	args := cmd.Args()
	for _, e := range []error{err, cmd.Err()} {
		if e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			return false
		}
	}
	if len(args) < 2 {
		return false
	}
	var sha string
	switch strings.ToLower(cmd.Name()) {
	case "evalsha":
		sha, _ = args[1].(string)
	case "eval":
		src, _ := args[1].(string)
		sha = redis.NewScript(src).Hash()
	default:
		return false
	}
	name := d.names[sha]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.drop[name] == 0 {
		return false
	}
	if d.skip[name] > 0 {
		d.skip[name]--
		return false
	}
	d.drop[name]--
	cmd.SetErr(errReplyLost)
	return true
}

// lossCase is one operation whose reply may be lost. setup brings a fresh
// run to just before the operation (with the store that never loses
// replies); op performs it with a fixed identity, so calling it again is
// the retry a worker makes.
type lossCase struct {
	name   string
	script string // the script whose reply is lost
	defs   []nodeDef
	setup  func(t *testing.T, tb *testBundle, run string) any
	op     func(ctx context.Context, s *fence.Store, run string, state any) (any, error)
}

// TestLostReplyEndsWhereNoLossWould: for every script, an operation whose
// reply was lost after the script ran, retried with the same identity,
// answers as it would have without the loss, and leaves the run exactly as
// one call would: no second claim, no attempt burnt, no orphaned claim, no
// duplicate event.
func TestLostReplyEndsWhereNoLossWould(t *testing.T) {
	t.Parallel()
	claimed := func(owner string, ttl time.Duration) func(*testing.T, *testBundle, string) any {
		return func(t *testing.T, tb *testBundle, run string) any {
			c, err := tb.store.ClaimAs(tb.ctx, ref(run, "a"), owner, "claim-a", ttl, grace)
			require.NoError(t, err)
			return c
		}
	}
	lease := func(state any) fence.Lease { return state.(*fence.Claimed).Lease }
	cases := []lossCase{
		{name: "submit", script: "submit", defs: []nodeDef{node("a"), node("b", "a")},
			setup: func(*testing.T, *testBundle, string) any { return nil },
			op: func(ctx context.Context, s *fence.Store, run string, _ any) (any, error) {
				return s.Submit(ctx, spec(run, node("a"), node("b", "a")))
			}},
		{name: "claim", script: "claim", defs: []nodeDef{node("a")},
			setup: func(*testing.T, *testBundle, string) any { return nil },
			op: func(ctx context.Context, s *fence.Store, run string, _ any) (any, error) {
				return s.ClaimAs(ctx, ref(run, "a"), "w", "claim-w", longTTL, grace)
			}},
		{name: "takeover", script: "claim", defs: []nodeDef{node("a")},
			setup: func(t *testing.T, tb *testBundle, run string) any {
				claimed("dead", shortTTL)(t, tb, run)
				tb.advance(t, pastExpiry)
				return nil
			},
			op: func(ctx context.Context, s *fence.Store, run string, _ any) (any, error) {
				return s.ClaimAs(ctx, ref(run, "a"), "w", "claim-w", longTTL, grace)
			}},
		{name: "heartbeat", script: "heartbeat", defs: []nodeDef{node("a")}, setup: claimed("w", longTTL),
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				return s.Heartbeat(ctx, lease(st), longTTL, 40)
			}},
		{name: "commit with continuation", script: "commit",
			defs: []nodeDef{node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c")}, setup: claimed("w", longTTL),
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				c := st.(*fence.Claimed)
				return s.CommitContinue(ctx, c.Lease, []byte(`"a done"`), c.Dependents, fence.Continue{
					ClaimID: "claim-next", TTL: longTTL, Queues: []string{"default"}, Kinds: []string{"noop"}})
			}},
		{name: "fail and retry", script: "fail", defs: []nodeDef{node("a"), node("b", "a")}, setup: claimed("w", longTTL),
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				c := st.(*fence.Claimed)
				return s.Fail(ctx, c.Lease, fence.Failure{Err: "boom"}, c.Descendants)
			}},
		{name: "fail for good", script: "fail", defs: []nodeDef{node("a"), node("b", "a")}, setup: claimed("w", longTTL),
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				c := st.(*fence.Claimed)
				return s.Fail(ctx, c.Lease, fence.Failure{Err: "boom", Final: true}, c.Descendants)
			}},
		{name: "release", script: "release", defs: []nodeDef{node("a")}, setup: claimed("w", longTTL),
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				return s.Release(ctx, lease(st), "shutdown")
			}},
		{name: "expire", script: "fail", defs: []nodeDef{node("a").attempts(1), node("b", "a")},
			setup: func(t *testing.T, tb *testBundle, run string) any {
				claimed("dead", shortTTL)(t, tb, run)
				tb.advance(t, pastExpiry)
				_, err := tb.store.Claim(tb.ctx, ref(run, "a"), "w", longTTL, grace)
				var ee *fence.ExpiredError
				require.ErrorAs(t, err, &ee)
				return ee
			},
			op: func(ctx context.Context, s *fence.Store, _ string, st any) (any, error) {
				return s.Expire(ctx, st.(*fence.ExpiredError), "sweeper", grace)
			}},
	}
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossyStore := tb.lossyStore(t)

		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				outcome := map[bool]string{}
				for _, lose := range []bool{false, true} {
					run := fmt.Sprintf("clean%d", i)
					if lose {
						run = fmt.Sprintf("lost%d", i)
					}
					if tc.script != "submit" {
						tb.submit(t, spec(run, tc.defs...))
					}
					state := tc.setup(t, tb, run)
					if lose {
						dropper.loseNext(tc.script, 1)
						_, err := tc.op(tb.ctx, lossyStore, run, state)
						require.ErrorIs(t, err, errReplyLost)
						require.False(t, fence.IsRefused(err), "a lost reply is not a script's answer")
					}
					answer, err := tc.op(tb.ctx, lossyStore, run, state)
					require.NoError(t, err, "the retry (or the only call) succeeds")
					outcome[lose] = tb.snapshot(t, run, answer)
				}
				require.JSONEq(t, outcome[false], outcome[true], "with the loss and its retry as with one call")
			})
		}
	})
}

// snapshot is what a user can see after an operation on run: its answer,
// every node, the run's status and how many events of each type, as JSON
// with times, incarnations and the run's own name left out.
func (tb *testBundle) snapshot(t *testing.T, run string, answer any) string {
	t.Helper()
	info := tb.getRun(t, run)
	nodes := map[string]any{}
	for _, n := range info.Nodes {
		nodes[n.ID] = []any{n.State, n.Attempt, n.Epoch, n.Owner, n.Progress, n.Result, n.Error}
	}
	events := map[string]int{}
	for _, e := range tb.events(t, run) {
		events[e.Type]++
	}
	b, err := json.Marshal(map[string]any{"answer": answer, "status": info.Status, "nodes": nodes, "events": events})
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	strip(v)
	b, err = json.Marshal(v)
	require.NoError(t, err)
	return strings.ReplaceAll(string(b), `"`+run+`"`, `"RUN"`)
}

// strip drops the fields that differ between two identical histories:
// Redis times, the random incarnation, and the flags that tell a retry
// from a first call (Created, Replay).
func strip(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "Until" || k == "ReadyAt" || k == "Start" || k == "Incarnation" || k == "Created" || k == "Replay" {
				delete(x, k)
				continue
			}
			strip(e)
		}
	case []any:
		for _, e := range x {
			strip(e)
		}
	}
}

// A replayed claim or continuation renews its lease from the retry: the
// time the lost replies took is not taken from the holder's lease.
func TestReplayRenewsTheLease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("renew", node("a"), node("b", "a")))
		first, err := tb.store.ClaimAs(tb.ctx, ref("renew", "a"), "w", "claim-a", shortTTL, grace)
		require.NoError(t, err)
		tb.advance(t, shortTTL/2)
		again, err := tb.store.ClaimAs(tb.ctx, ref("renew", "a"), "w", "claim-a", shortTTL, grace)
		require.NoError(t, err)
		require.GreaterOrEqual(t, again.Until.Sub(first.Until), shortTTL/2, "the replay renewed the lease")

		cont := fence.Continue{ClaimID: "claim-b", TTL: shortTTL, Queues: []string{"default"}, Kinds: []string{"noop"}}
		res, err := tb.store.CommitContinue(tb.ctx, again.Lease, []byte(`1`), again.Dependents, cont)
		require.NoError(t, err)
		tb.advance(t, shortTTL/2)
		replay, err := tb.store.CommitContinue(tb.ctx, again.Lease, []byte(`1`), again.Dependents, cont)
		require.NoError(t, err)
		require.True(t, replay.Replay)
		require.GreaterOrEqual(t, replay.Next.Until.Sub(res.Next.Until), shortTTL/2, "the continuation's lease too")
		require.Equal(t, res.Next.Epoch, replay.Next.Epoch)
	})
}
