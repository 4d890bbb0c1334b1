package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

func runBench(t *testing.T, url string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "REDIS_URL" {
			return url
		}
		return ""
	}
	code = run(context.Background(), args, getenv, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-n", "0"},
		{"-mode", "diamond"},
		{"-k", "1001"},
		{"-db", "16"},
		{"-poll", "0s"},
		{"-cancels", "-1"},
		{"-mode", "cancel", "-cancels", "0"},
		{"-cluster", "2"},
		{"-cluster", "3", "-own-redis"},
		{"-queues", "0"},
		{"-callgrind"},
		{"-callgrind", "-sections", "scripts", "-cluster", "3"},
		{"-script-calls", "0"},
		{"-trace-sample", "1.5"},
		{"-trace-sample", "ten"},
		{"-nosuchflag"},
		{"extra"},
	} {
		code, _, stderr := runBench(t, "redis://127.0.0.1:1/0", args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.NotEmpty(t, stderr, "%v", args)
	}
	// Every problem at once, each naming its flag.
	_, _, stderr := runBench(t, "", "-n", "-1", "-concurrency", "0")
	require.Contains(t, stderr, "-n -1")
	require.Contains(t, stderr, "-concurrency 0")

	code, _, _ := runBench(t, "", "-h")
	require.Equal(t, 0, code)
}

// The bench empties its database: it must refuse one that holds keys unless
// told to flush it, and leave those keys alone.
func TestRefusesDatabaseWithKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	other := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = other.Close() })
	require.NoError(t, other.Set(ctx, "precious", "1", 0).Err())

	code, _, stderr := runBench(t, srv.URL(), "-n", "10", "-runs", "1", "-warmup", "0", "-sections", "throughput")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "-flush")
	require.Equal(t, "1", other.Get(ctx, "precious").Val())

	// The URL's own database is never touched: only -db.
	db0 := srv.Client(t)
	require.NoError(t, db0.Set(ctx, "also-precious", "1", 0).Err())
	code, _, stderr = runBench(t, srv.URL(), "-n", "10", "-runs", "1", "-warmup", "0", "-db", "3", "-mode", "single",
		"-sections", "throughput")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "1", db0.Get(ctx, "also-precious").Val())
	require.Equal(t, "1", other.Get(ctx, "precious").Val())
}

// A small run of every mode prints a row for each and leaves the database
// empty.
func TestSmallRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-n", "200", "-k", "5", "-runs", "1", "-warmup", "20",
		"-mode", "all", "-poll", "10ms", "-v", "-cancels", "0", "-sections", "throughput")
	require.Equal(t, 0, code, stderr)
	for _, row := range []string{`asynq +flat +200 `, `baton +single +200 `, `baton +wide k=5 +200 `,
		`asynq +chain k=5 +200 `, `baton +chain k=5 +200 `} {
		require.Regexp(t, row, stdout)
	}
	// Baton's drain commits every node once, and claims at most one a node:
	// a commit may take the queue's next node (runner.WorkerConfig.NoTake).
	require.Regexp(t, `evalsha baton:claim +(0\.\d{3}|1\.000)`, stdout)
	require.Regexp(t, `evalsha baton:commit +1\.000`, stdout)
	// How much CPU the host took: a share of 0–100%, in the text and the JSON.
	require.Regexp(t, `host CPU steal during the drains: \d+%–\d+% of the machine's CPU time`, stdout)
	require.Regexp(t, `"host_steal_max":(0|1|0\.\d+)[,}]`, stdout)
	require.Regexp(t, `\(load [0-9.]+, steal \d+%, busy \d+%\)`, stderr)
	// What the machine's CPU allows baton against asynq, and how busy it
	// was (after ×bullmq kept and removed, "skipped" without BullMQ).
	require.Regexp(t, `baton +single +200 +\d+ +\d+ +\d+–\d+ +\d+\.\d\d +(\d+\.\d\d|skipped) +(\d+\.\d\d|skipped) +\d+\.\d\d +(\d+\.\d\d|skipped) +\d+% `, stdout)
	require.Regexp(t, `"cpu_bound_x_asynq":\d+(\.\d+)?[,}]`, stdout)
	require.Regexp(t, `"busy":(0|1|0\.\d+)[,}]`, stdout)

	db := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = db.Close() })
	require.Zero(t, db.DBSize(context.Background()).Val())
}

// -trace-sample adds a traced baton row per ratio beside the untraced one,
// each draining every node.
func TestTracedRows(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-n", "200", "-runs", "1", "-warmup", "20", "-mode", "single",
		"-poll", "10ms", "-cancels", "0", "-bullmq=false", "-sections", "throughput", "-trace-sample", "0.1,1")
	require.Equal(t, 0, code, stderr)
	for _, row := range []string{`baton +single +200 `, `baton +single traced=10% +200 `, `baton +single traced=100% +200 `} {
		require.Regexp(t, row, stdout)
	}
}

// The limits section drains the same one-node runs without and with a
// concurrency limit and a rate on every node, and prints both and their
// ratios in its table and in the JSON line.
func TestLimitsSection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-sections", "limits", "-n", "60", "-runs", "1", "-warmup", "10",
		"-poll", "10ms")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "limits: one-node runs, every node naming a concurrency limit (1000 at once) and a rate (100000/s, burst 100000)")
	require.Regexp(t, `(?m)^ +without limits +60 +\d+ +\d+–\d+ +\d+\.\d\d +\d+\.\d +\d+\.\d +\d+\.\d *$`, stdout)
	require.Regexp(t, `(?m)^ +with limits +60 +\d+ +\d+–\d+ +\d+\.\d\d +\d+\.\d +\d+\.\d +\d+\.\d *$`, stdout)
	require.Regexp(t, `(?m)^ +with/without +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d *$`, stdout)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var rep struct {
		Limits struct {
			Concurrency       int                `json:"concurrency"`
			With              map[string]float64 `json:"with"`
			XClaimsPerS       float64            `json:"x_claims_per_s"`
			XRedisCmdsPerNode float64            `json:"x_redis_cmds_per_node"`
		} `json:"limits"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), stdout)
	require.Equal(t, 1000, rep.Limits.Concurrency)
	require.Equal(t, 60.0, rep.Limits.With["nodes"])
	require.Positive(t, rep.Limits.XClaimsPerS)
	require.Greater(t, rep.Limits.XRedisCmdsPerNode, 1.0, "taking and freeing a slot and a token costs Redis commands")

	db := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = db.Close() })
	require.Zero(t, db.DBSize(context.Background()).Val())
}

// -mode cancel measures cancel latency alone: a row per kind with as many
// cancels as asked, and no throughput table.
func TestCancelLatency(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-mode", "cancel", "-cancels", "5", "-poll", "10ms")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^ +go +5 +[0-9.]+ms +[0-9.]+ms +[0-9.]+ms *$`, stdout)
	require.Regexp(t, `(?m)^ +exec +5 +[0-9.]+ms +[0-9.]+ms +[0-9.]+ms *$`, stdout)
	require.NotContains(t, stdout, "drain/s", "no throughput measured")

	db := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = db.Close() })
	require.Zero(t, db.DBSize(context.Background()).Val())
}

// Every other section runs at a small size and ends the output with one
// JSON line holding each section's figures.
func TestSections(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-sections", "scripts,latency,cancel,takeover,heartbeat,memory,sweep",
		"-runs", "1", "-rate", "200", "-latency-for", "500ms", "-cancels", "2", "-takeovers", "1", "-takeover-ttl", "600ms",
		"-hb-nodes", "20", "-mem-nodes", "1000", "-k", "4", "-sweep-nodes", "400")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), stdout)
	for _, k := range []string{"scripts", "latency", "cancel", "takeover", "heartbeat", "memory", "sweep"} {
		require.Contains(t, rep, k)
	}
	hb := rep["heartbeat"].(map[string]any)
	require.InDelta(t, 1.0, hb["round_trips_per_tick"], 0.21, "one pipeline per tick whatever the number of nodes")
	require.Equal(t, 400.0, rep["sweep"].(map[string]any)["finished_nodes"])
	// 1,000 nodes: a packed finished run is a few hundred bytes, and at 40
	// nodes used_memory's own movement (client buffers, tens of kB) once
	// made the difference negative (-1,111 B a node).
	mem := rep["memory"].(map[string]any)
	for _, k := range []string{"waiting_bytes_per_node_k1", "waiting_bytes_per_node_k4", "bytes_per_node_k1", "bytes_per_node_k4"} {
		require.Greater(t, mem[k], 0.0, "%s: the runs' keys take memory", k)
	}
	for _, k := range []string{"k1", "k4"} {
		require.Less(t, mem["reloaded_bytes_per_node_"+k].(float64), mem["waiting_bytes_per_node_"+k].(float64)/2,
			"%s: a finished run, packed into one key, takes less than half the memory it took while it waited", k)
	}

	db := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = db.Close() })
	require.Zero(t, db.DBSize(context.Background()).Val())
}

// -callgrind counts the instructions Redis executes per call of each
// operation in the scripts section. Counted again on a new server, baton's
// figures repeat to within 5% over 100 calls (1.2% seen on a quiet host,
// 3.02% once on a loaded CI host), however busy the host (the reason the option exists: times move by tens of percent); what
// moves them is Redis's cron, a tick a second, falling in one window or
// another. Asynq's enqueue is not
// held to it: its task ids are random, so its key lookups differ from one
// run to the next (by up to 3.2% of its count over 200 calls).
func TestCallgrindCounts(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("BATON_REQUIRE_VALGRIND") != "" {
				t.Fatalf("%s not installed (BATON_REQUIRE_VALGRIND is set)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	counts := func() map[string]float64 {
		code, stdout, stderr := runBench(t, "redis://127.0.0.1:1/0", "-callgrind", "-sections", "scripts",
			"-runs", "1", "-script-calls", "100")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Redis instructions/call")
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		var rep struct {
			Scripts map[string]struct {
				Instr float64 `json:"redis_instructions"`
			} `json:"scripts"`
		}
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), stdout)
		out := map[string]float64{}
		for op, c := range rep.Scripts {
			out[op] = c.Instr
		}
		return out
	}
	first, second := counts(), counts()
	for _, op := range []string{"submit", "claim", "heartbeat", "commit", "retain", "asynq enqueue"} {
		require.Greater(t, first[op], 10000.0, "%s: a call executes thousands of instructions", op)
		t.Logf("%s: %.0f %.0f %+.2f%%", op, first[op], second[op], 100*(second[op]-first[op])/first[op])
		if op != "asynq enqueue" {
			require.InEpsilon(t, first[op], second[op], 0.05, "%s: counted twice", op)
		}
	}
	require.Greater(t, first["claim"], first["asynq enqueue"])
}

// With -queues Q, each queue's hash slot lies in its own Q-th of the slot
// range, so on Q masters made by redis-cli each master holds one queue.
func TestQueueNamesSpreadOverMasters(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"default"}, queueNames(1))
	for _, n := range []int{2, 3, 5, 16} {
		for i, q := range queueNames(n) {
			slot := int(fence.Slot("asynq:{" + q + "}:pending"))
			require.Equal(t, i, slot*n/16384, "queue %s of %d: slot %d", q, n, slot)
		}
	}
}

// -cluster 3 runs every shape on a cluster the bench starts and stops, and
// says that bare Asynq's one queue lives on one master.
func TestClusterRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed")
	}
	code, stdout, stderr := runBench(t, "redis://127.0.0.1:1/0", "-cluster", "3", "-n", "200", "-k", "5", "-runs", "1",
		"-warmup", "20", "-mode", "all", "-poll", "10ms", "-sections", "throughput,limits,memory")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "redis:  cluster, masters: 3 (127.0.0.1:")
	require.Regexp(t, `queues: default \(slot \d+, 127\.0\.0\.1:\d+\).* on 1 of 3 masters`, stdout)
	for _, row := range []string{`asynq +flat +200 `, `baton +single +200 `, `baton +wide k=5 +200 `, `baton +chain k=5 +200 `} {
		require.Regexp(t, row, stdout)
	}
	require.Contains(t, stdout, "memory: skipped on a cluster")
	// Limits on a cluster: measured as on a single server.
	require.Regexp(t, `(?m)^ +with limits +200 `, stdout)
	require.Contains(t, stdout, `"x_claims_per_s":`)
}
