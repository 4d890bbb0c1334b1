package fence

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/scripts/lua"
)

// header is what a script's header documents.
type header struct {
	keys, args       int     // fixed KEYS[1..keys] and ARGV[1..args]
	varKeys, varArgs int     // n of a trailing KEYS[n..] / ARGV[n..], 0 if none
	codes            []int64 // negative codes listed under Returns
}

var (
	reKey    = regexp.MustCompile(`^\s*KEYS\[(\d+)(\.\.)?\]\s`)
	reArg    = regexp.MustCompile(`^\s*ARGV\[(\d+)(\.\.)?\]\s`)
	reCode   = regexp.MustCompile(`(?:^\s*|\{)(-\d+)\b`)
	reReturn = regexp.MustCompile(`return\s*\{?\s*(-\d+)\b`)
)

// parseHeader reads the --[[ ... ]] block that opens a script.
func parseHeader(t *testing.T, name, src string) header {
	t.Helper()
	require.True(t, strings.HasPrefix(src, "--[["), "%s: starts with a --[[ header", name)
	end := strings.Index(src, "]]")
	require.Positive(t, end, "%s: header is closed", name)
	var h header
	inReturns := false
	for _, line := range strings.Split(src[:end], "\n") {
		if strings.TrimSpace(line) == "Returns" {
			inReturns = true
			continue
		}
		if inReturns {
			for _, m := range reCode.FindAllStringSubmatch(line, -1) {
				c, _ := strconv.ParseInt(m[1], 10, 64)
				h.codes = append(h.codes, c)
			}
			continue
		}
		for _, p := range []struct {
			re       *regexp.Regexp
			fixed, v *int
			what     string
		}{{reKey, &h.keys, &h.varKeys, "KEYS"}, {reArg, &h.args, &h.varArgs, "ARGV"}} {
			m := p.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			require.Zero(t, *p.v, "%s: %s[%d] after the variadic %s[%d..]", name, p.what, n, p.what, *p.v)
			if m[2] != "" {
				require.Equal(t, *p.fixed+1, n, "%s: %s[%d..] follows the fixed ones", name, p.what, n)
				*p.v = n
				continue
			}
			require.Equal(t, *p.fixed+1, n, "%s: %s numbered 1, 2, 3, ... without gaps", name, p.what)
			*p.fixed = n
		}
	}
	require.True(t, inReturns, "%s: header has a Returns section", name)
	return h
}

// bindings is what the Go side passes to each script: fixed keys and args,
// and whether a list of node keys and a list of node ids follow (submit
// passes its node ids inside one JSON ARGV). TestBindings checks this table
// against the calls the Store really makes.
var bindings = map[string]struct {
	keys, args       int
	varKeys, varArgs bool
	keysPerArg       int // keys listed per variadic ARGV; zero: 1
	trailingKeys     int // keys that may follow the listed ones, at most
}{
	// submit: the new run's node keys (one per node of the JSON ARGV[5])
	// follow the fixed keys, then the active run's, listed by ARGV[18..].
	"submit":    {13, 17, true, true, 0, 1000},
	"claim":     {5, 11, false, false, 0, 0},
	"heartbeat": {4, 8, false, false, 0, 0},
	"commit":    {6, 17, true, true, 0, 1},
	"fail":      {6, 11, true, true, 0, 0},
	"release":   {6, 7, false, false, 0, 0},
	"cancel":    {5, 5, true, true, 0, 0},
	"sweep":     {3, 5, false, false, 0, 0},
	"guard":     {1, 3, false, false, 0, 0},

	"checkpoint":        {9, 15, false, false, 0, 0},
	"checkpoint_writes": {8, 13, false, false, 0, 0},
	"checkpoint_delete": {5, 9, true, true, 4, 0},
	// promote: the queued runs and the head's nodes are listed one key per
	// ARGV; each namespace listed has four keys (up to 100 namespaces).
	"promote": {8, 7, true, true, 0, 300},
	"retry":   {6, 6, true, true, 0, 0},
	"retain":  {4, 7, true, false, 0, 0},
	"delete":  {5, 4, true, false, 0, 0},
	// timeout cancels a run past its deadline (stored by submit).
	"timeout":      {6, 5, true, true, 0, 0},
	"packed_fence": {2, 6, false, true, 0, 0},
	"locator":      {3, 2, false, false, 0, 0},
	"park":         {6, 11, false, false, 0, 0},
	"resume":       {5, 7, false, false, 0, 0},
	// wait_keep: the thread's namespaces, four keys each.
	"wait_keep": {3, 3, true, true, 4, 0},
	"trace":     {1, 1, false, false, 0, 0},
	// schedules: the schedule's hash and the index, in one slot.
	"schedule_put":  {2, 4, false, false, 0, 0},
	"schedule_rm":   {2, 1, false, false, 0, 0},
	"schedule_fire": {2, 11, false, false, 0, 0},
	// limits on a Redis Cluster: one limit key's keys, in its own slot.
	"limit_take":   {3, 10, false, false, 0, 0},
	"limit_free":   {3, 7, false, false, 0, 0},
	"limit_extend": {2, 3, false, false, 0, 0},
	"limit_use":    {3, 0, false, false, 0, 0},
	// stream_append: the chunks follow the fixed ARGV, two each.
	"stream_append": {5, 11, false, true, 0, 0},
	"limit_conc":    {2, 1, false, false, 0, 0},
	// limit_set: the definitions and the index of keys seen, then the
	// holders and waiters of each key seen under the limit.
	"limit_set": {2, 2, true, false, 0, 0},
	// The Agent Server API's records (agent_test.go): fields follow as
	// pairs.
	"agent_thread_put":    {2, 4, false, false, 0, 0},
	"agent_thread_write":  {1, 2, false, true, 0, 0},
	"agent_thread_delete": {3, 2, false, false, 0, 0},
	"agent_asst_put":      {3, 4, false, true, 0, 0},
	"agent_asst_write":    {2, 4, false, true, 0, 0},
	"agent_asst_delete":   {4, 2, false, false, 0, 0},
	"agent_ckpt_copy":     {5, 7, false, false, 0, 0},
	// agent_ckpt_keep_latest: four keys per namespace listed.
	"agent_ckpt_keep_latest": {3, 2, true, true, 4, 0},
	// the item store: one namespace's keys, or the index's.
	"store_put":     {2, 0, false, true, 0, 0},
	"store_get":     {2, 1, false, true, 0, 0},
	"store_index":   {2, 0, false, true, 0, 0},
	"store_unindex": {2, 1, false, true, 0, 0},
}

func scriptHeaders(t *testing.T) map[string]header {
	t.Helper()
	files, err := fs.Glob(lua.FS, "*.lua")
	require.NoError(t, err)
	out := map[string]header{}
	for _, f := range files {
		src, err := lua.FS.ReadFile(f)
		require.NoError(t, err)
		out[strings.TrimSuffix(f, ".lua")] = parseHeader(t, f, string(src))
	}
	return out
}

// TestScriptHeaders: every script's header agrees with its Go binding and
// every code it documents maps to a sentinel, and back.
func TestScriptHeaders(t *testing.T) {
	t.Parallel()
	headers := scriptHeaders(t)
	names := slices.Sorted(maps.Keys(headers))
	require.ElementsMatch(t, scriptNames, names, "every embedded script is bound, and only those")

	documented := map[int64]bool{}
	for _, name := range names {
		h, b := headers[name], bindings[name]
		require.Equal(t, b.keys, h.keys, "%s: fixed KEYS", name)
		require.Equal(t, b.args, h.args, "%s: fixed ARGV", name)
		require.Equal(t, b.varKeys, h.varKeys > 0, "%s: variadic KEYS", name)
		require.Equal(t, b.varArgs, h.varArgs > 0, "%s: variadic ARGV", name)
		for _, c := range h.codes {
			_, ok := codeErrors[c]
			require.True(t, ok, "%s: code %d has no sentinel in codeErrors", name, c)
			documented[c] = true
		}

		// Every negative code the body returns is documented.
		src, err := lua.Source(name)
		require.NoError(t, err)
		body := src[strings.Index(src, "]]"):]
		for _, m := range reReturn.FindAllStringSubmatch(body, -1) {
			c, _ := strconv.ParseInt(m[1], 10, 64)
			require.Contains(t, h.codes, c, "%s returns %d but its header does not say so", name, c)
		}
	}
	for c, err := range codeErrors {
		require.True(t, documented[c], "code %d (%v) appears in no script header", c, err)
	}
}

// evalRecorder records the EVALSHA/EVAL calls a client sends.
type evalRecorder struct {
	mu    sync.Mutex
	calls [][]any
}

func (r *evalRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *evalRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *evalRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (r *evalRecorder) record(cmd redis.Cmder) {
	if n := strings.ToLower(cmd.Name()); n == "evalsha" || n == "eval" {
		r.mu.Lock()
		r.calls = append(r.calls, cmd.Args())
		r.mu.Unlock()
	}
}

// exerciseScripts calls every script the Store binds: a run without a
// thread (run) and two runs queued on thread. It returns a lease of run.
func exerciseScripts(t *testing.T, s *Store, run, thread string) Lease {
	t.Helper()
	ctx := t.Context()
	_, err := s.Submit(ctx, SubmitArgs{Run: run, Digest: "d", Nodes: []NodeSpec{
		{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{"b"}, Descendants: []string{"b"}, MaxAttempts: 3},
		{ID: "b", Input: "null", Deps: []string{"a"}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3},
	}})
	require.NoError(t, err)
	nr := func(id string) NodeRef { return NodeRef{Thread: run, Run: run, Node: id} }
	a, err := s.Claim(ctx, nr("a"), "w", time.Minute, time.Second)
	require.NoError(t, err)
	_, err = s.Heartbeat(ctx, a.Lease, time.Minute, 10)
	require.NoError(t, err)
	_, errs := s.HeartbeatBatch(ctx, []Beat{{Lease: a.Lease, Progress: 20}}, time.Minute)
	require.NoError(t, errs[0])
	_, err = s.Commit(ctx, a.Lease, []byte(`1`), a.Dependents)
	require.NoError(t, err)
	b, err := s.Claim(ctx, nr("b"), "w", time.Minute, time.Second)
	require.NoError(t, err)
	_, err = s.Release(ctx, b.Lease, "x")
	require.NoError(t, err)
	b, err = s.Claim(ctx, nr("b"), "w", time.Minute, time.Second)
	require.NoError(t, err)
	_, err = s.AppendStream(ctx, b.Lease, 0, []StreamChunk{{Event: "updates", Data: []byte(`{"b":1}`)}})
	require.NoError(t, err)
	_, err = s.SaveCheckpoint(ctx, b.Lease, CheckpointWrite{NS: "b", ID: "c1", Data: []byte(`{}`)})
	require.NoError(t, err)
	_, err = s.PutWrites(ctx, b.Lease, "b", "c1", "t1", []PendingWrite{{Idx: 0, Channel: "x", Value: []byte(`1`)}})
	require.NoError(t, err)
	_, err = s.Fail(ctx, b.Lease, Failure{Err: "x"}, b.Descendants)
	require.NoError(t, err)
	_, err = s.Cancel(ctx, run, "x", "w")
	require.NoError(t, err)
	_, err = s.Retry(ctx, run, "retry-1", "w")
	require.NoError(t, err)
	_, err = s.Sweep(ctx, SweepOptions{Limit: 1})
	require.NoError(t, err)
	_, err = s.DeleteCheckpoints(ctx, run)
	require.ErrorIs(t, err, ErrThreadBusy, "the retried run is RUNNING")
	one := []NodeSpec{{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
	_, err = s.Submit(ctx, SubmitArgs{Run: thread + "-1", Thread: thread, Multitask: "enqueue", Digest: "d", Nodes: one})
	require.NoError(t, err)
	_, err = s.Submit(ctx, SubmitArgs{Run: thread + "-2", Thread: thread, Multitask: "enqueue", Digest: "d", Nodes: one})
	require.NoError(t, err)
	t1, err := s.Claim(ctx, NodeRef{Thread: thread, Run: thread + "-1", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	// CANCELLED, so that retention keeps its keys (a run that SUCCEEDED or
	// FAILED is packed into one key) and the delete below passes them.
	_, err = s.Cancel(ctx, thread+"-1", "enough", "w")
	require.NoError(t, err)
	_, err = s.Fail(ctx, t1.Lease, Failure{Err: "boom", Final: true}, nil)
	require.NoError(t, err)
	p, err := s.Promote(ctx, thread, "w")
	require.NoError(t, err)
	require.Equal(t, thread+"-2", p.Run)
	n, err := s.RetainFinished(ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Positive(t, n, "%s-1 finished", thread)
	w, err := s.Claim(ctx, NodeRef{Thread: thread, Run: thread + "-2", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	parked, err := s.Park(ctx, w.Lease, Wait{Request: []byte(`{"ask":"ok?"}`)})
	require.NoError(t, err)
	_, err = s.Resume(ctx, thread+"-2", "a", parked.WaitID, []byte(`true`), "w")
	require.NoError(t, err)
	tr, err := s.AdoptRunTrace(ctx, nr("a"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.NoError(t, err)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tr)
	_, err = s.DeleteRun(ctx, thread+"-1")
	require.NoError(t, err)
	sched := "sched-" + run
	gen, next, _, err := s.PutSchedule(ctx, sched, []byte(`{}`), time.UnixMilli(1000), "")
	require.NoError(t, err)
	_, err = s.AdvanceSchedule(ctx, Advance{Name: sched, Gen: gen, Expected: next, Fired: next, Next: next.Add(time.Second)})
	require.NoError(t, err)
	require.NoError(t, s.DeleteSchedule(ctx, sched))
	_, err = s.Submit(ctx, SubmitArgs{Run: run + "-t", Digest: "d", Nodes: one, Timeout: time.Millisecond, TimeoutLabel: "1ms"})
	require.NoError(t, err)
	for deadline := time.Now().Add(5 * time.Second); ; { // until Redis's clock passes the 1 ms
		timedOut, err := s.TimeOutRuns(ctx, "w", 10)
		require.NoError(t, err)
		if len(timedOut) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run's 1 ms timeout never passed")
	}

	// A run that SUCCEEDED is packed by the retention (retain.lua); a late
	// write to it is answered by packed_fence.lua.
	_, err = s.Submit(ctx, SubmitArgs{Run: run + "-p", Digest: "d", Nodes: one})
	require.NoError(t, err)
	pc, err := s.Claim(ctx, NodeRef{Thread: run + "-p", Run: run + "-p", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	_, err = s.Commit(ctx, pc.Lease, []byte(`1`), nil)
	require.NoError(t, err)
	_, err = s.RetainFinished(ctx, time.Hour, 10)
	require.NoError(t, err)
	late := pc.Lease
	late.Epoch--
	_, err = s.Heartbeat(ctx, late, time.Minute, 0)
	require.ErrorIs(t, err, ErrStaleEpoch)

	// The scripts of limits on a Redis Cluster (limitcluster.go), called
	// as the store calls them there.
	k := "lim-" + run
	lk := []string{s.keys.LimitHolders(k), s.keys.LimitWaiters(k), s.keys.LimitTAT(k)}
	_, err = s.run(ctx, "limit_take", lk, Ref(run, run, "x"), "c1", "", "default", 3000, 1, 10, 1000, 0, 1)
	require.NoError(t, err)
	_, errs = s.extendClustered(ctx, []Beat{{Lease: Lease{Thread: run, Run: run, Node: "x", ClaimID: "c1", Limits: k + "=1"}}}, time.Second)
	require.NoError(t, errs[0])
	_, err = s.limitUseClustered(ctx, Limit{Name: k, Concurrency: 1}, []string{k})
	require.NoError(t, err)
	s.giveBack(ctx, NodeRef{Thread: run, Run: run, Node: "x"}, "c1", []string{k})
	_, err = s.run(ctx, "limit_conc", lk[:2], 2)
	require.NoError(t, err)

	exerciseAgentScripts(t, s, run)
	// The item store (store_items.go): a put, a get, a search that
	// finds an emptied namespace (store_unindex.lua).
	ins := []string{"mem", run}
	require.NoError(t, s.PutItems(ctx, []ItemWrite{{Namespace: ins, Key: "k", Value: []byte(`{"a":1}`), TTL: time.Hour}}))
	_, err = s.GetItem(ctx, ins, "k", true)
	require.NoError(t, err)
	require.NoError(t, s.PutItems(ctx, []ItemWrite{{Namespace: ins, Key: "k"}}))
	_, err = s.SearchItems(ctx, ItemSearch{Prefix: ins})
	require.NoError(t, err)

	return a.Lease
}

// TestBindings: the keys and args the Store really passes to each script
// match its header, including the lists of node keys and ids.
func TestBindings(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	rec := &evalRecorder{}
	rdb.(*redis.Client).AddHook(rec)
	s := New(rdb, nil)
	ctx := t.Context()
	byScript := map[string]string{}
	for name, sc := range s.scripts {
		byScript[sc.Hash()] = name
	}

	a := exerciseScripts(t, s, "r", "th")
	// limit_set.lua runs on a single server only (its keys span slots),
	// with the keys seen under the limit.
	require.NoError(t, rdb.ZAdd(ctx, s.keys.LimitSeen(), redis.Z{Score: 1, Member: "lim-r"}).Err())
	require.NoError(t, s.SetLimit(ctx, Limit{Name: "lim-r", Concurrency: 2}))
	// guard.lua is bound by Guard (a downstream service's), not by Store.
	require.NoError(t, NewGuard(rdb, nil).Admit(ctx, a.Token()))

	headers := scriptHeaders(t)
	seen := map[string]bool{}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, args := range rec.calls {
		name := byScript[fmt.Sprint(args[1])]
		if name == "" { // EVAL carries the source
			for n := range s.scripts {
				if src, _ := lua.Source(n); src == fmt.Sprint(args[1]) {
					name = n
				}
			}
		}
		require.NotEmpty(t, name, "a call to an unknown script")
		seen[name] = true
		numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
		require.NoError(t, err)
		numArgs := len(args) - 3 - numKeys
		h := headers[name]
		switch {
		case h.varKeys == 0:
			require.Equal(t, h.keys, numKeys, "%s: keys passed", name)
		case h.varArgs == 0: // submit: one node key per node in the JSON ARGV
			require.Greater(t, numKeys, h.keys, "%s: node keys passed", name)
		default:
			require.GreaterOrEqual(t, numKeys, h.keys, "%s: keys passed", name)
			listed := max(1, bindings[name].keysPerArg) * (numArgs - h.args)
			require.GreaterOrEqual(t, numKeys-h.keys, listed, "%s: ARGV ids match the listed keys", name)
			require.LessOrEqual(t, numKeys-h.keys-listed, bindings[name].trailingKeys, "%s: keys after the listed ones", name)
		}
		if h.varArgs == 0 {
			require.Equal(t, h.args, numArgs, "%s: args passed", name)
		} else {
			require.GreaterOrEqual(t, numArgs, h.args, "%s: args passed", name)
		}
	}
	require.ElementsMatch(t, scriptNames, slices.Sorted(maps.Keys(seen)), "the flow called every script")
}

// TestScriptsTouchOneSlot: whatever the thread, every script call the
// Store makes names keys of one Redis Cluster slot, so a cluster runs it
// instead of answering CROSSSLOT. Checked over many threads, so that
// every shard is met.
func TestScriptsTouchOneSlot(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	rec := &evalRecorder{}
	rdb.(*redis.Client).AddHook(rec)
	s := New(rdb, nil)
	shards := map[int]bool{}
	for i := range 100 {
		run, thread := fmt.Sprintf("run-%d", i), fmt.Sprintf("thread.%d", i)
		exerciseScripts(t, s, run, thread)
		shards[ShardOf(run)], shards[ShardOf(thread)] = true, true
	}
	require.Len(t, shards, Shards, "100 runs and threads meet every shard")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.calls)
	for _, args := range rec.calls {
		numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
		require.NoError(t, err)
		require.Positive(t, numKeys, "a script with no keys would run on any node")
		slot := Slot(fmt.Sprint(args[3]))
		for _, k := range args[3 : 3+numKeys] {
			require.Equal(t, slot, Slot(fmt.Sprint(k)), "%v: key %s is in another slot than %s", args[0], k, args[3])
		}
	}
}

// TestSlot: Slot agrees with Redis's cluster spec: CRC16-XMODEM of the
// key or of its first non-empty hash tag, modulo 16384. The values are
// CLUSTER KEYSLOT's on a Redis 7 cluster.
func TestSlot(t *testing.T) {
	require.Equal(t, uint16(0x31C3), crc16("123456789"), "the spec's check value")
	for key, slot := range map[string]uint16{
		"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0,
	} {
		require.Equal(t, slot, Slot(key), "slot of %q", key)
	}
	// Each shard's tag lies in its sixteenth of the slot range.
	k := Keys{}
	for i := range Shards {
		require.Equal(t, i, int(Slot(k.Leases(i)))/(16384/Shards), "shard %d", i)
	}
}
