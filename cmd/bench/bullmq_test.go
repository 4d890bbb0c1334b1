package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// requireBullMQ skips the test when node or the bench's npm package is
// missing, and fails it instead when BATON_REQUIRE_NODE is set (CI, which
// installs both).
func requireBullMQ(t *testing.T) bullmqPackage {
	t.Helper()
	o, err := parseFlags(nil, func(string) string { return "" }, os.Stderr)
	require.NoError(t, err)
	pkg, skip := findBullMQ(o)
	if skip != "" {
		if os.Getenv("BATON_REQUIRE_NODE") != "" {
			t.Fatalf("BullMQ cannot run (BATON_REQUIRE_NODE is set): %s", skip)
		}
		t.Skipf("BullMQ not measured: %s (install node >= 20, then npm ci in cmd/bench/bullmq)", skip)
	}
	return pkg
}

// The bench drains BullMQ beside Asynq and baton on the same Redis: its
// rows, baton's ratio to it and what a kept job costs in Redis memory are
// in the table and the JSON line, and the database is left empty.
func TestBullMQDrain(t *testing.T) {
	t.Parallel()
	pkg := requireBullMQ(t)
	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-n", "2000", "-runs", "1", "-warmup", "30", "-mode", "single",
		"-poll", "10ms", "-cancels", "0", "-sections", "throughput", "-v")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "bullmq: "+pkg.version)
	require.Regexp(t, `bullmq +flat kept +2000 `, stdout)
	require.Regexp(t, `bullmq +flat removed +2000 `, stdout)
	// ×asynq, ×bullmq kept and removed, side by side.
	require.Regexp(t, `baton +single +2000 +\d+ +\d+ +\d+–\d+ +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d `, stdout)

	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var rep struct {
		BullMQ     map[string]any   `json:"bullmq"`
		Throughput []map[string]any `json:"throughput"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), stdout)
	require.Equal(t, pkg.version, rep.BullMQ["version"])
	rows := map[string]map[string]any{}
	for _, r := range rep.Throughput {
		rows[r["system"].(string)+" "+r["mode"].(string)] = r
	}
	kept, removed, baton := rows["bullmq flat kept"], rows["bullmq flat removed"], rows["baton single"]
	require.NotNil(t, kept, stdout)
	require.NotNil(t, removed, stdout)
	for _, r := range []map[string]any{kept, removed} {
		require.Equal(t, 2000.0, r["nodes"], "every job drained")
		for _, k := range []string{"drain_per_s", "redis_cmds_per_node", "redis_cpu_us_per_node", "cpu_us_per_node", "cores", "x_asynq"} {
			require.Greater(t, r[k], 0.0, "%s %s", r["mode"], k)
		}
		require.NotContains(t, r, "rt_per_node", "node's round trips are not counted")
	}
	// A kept job stays in Redis (its hash and a completed-set entry); a
	// removed one leaves at most its events behind. used_memory moves by
	// the allocator's and the dict's steps and by client buffers (tens of
	// kB), which at 300 jobs outweighed the difference (removed 178 B a job
	// against kept 158 B was seen under load): 2,000 jobs put the kept
	// jobs' megabyte well above that noise, and the test compares the two
	// rather than pinning a size.
	require.Greater(t, kept["redis_bytes_per_node"], 0.0)
	require.Less(t, removed["redis_bytes_per_node"], kept["redis_bytes_per_node"])
	// BullMQ runs a script to take a job and one to complete it (which
	// takes the next): a few Redis commands each, not hundreds.
	require.Less(t, kept["redis_cmds_per_node"], 100.0)
	require.Greater(t, baton["x_bullmq_kept"], 0.0)
	require.Greater(t, baton["x_bullmq_removed"], 0.0)
	require.Greater(t, baton["cpu_bound_x_bullmq_kept"], 0.0)
	require.Greater(t, baton["redis_bytes_per_node"], 0.0, "baton retains its finished runs")

	db := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 15})
	t.Cleanup(func() { _ = db.Close() })
	require.Zero(t, db.DBSize(context.Background()).Val())
}

// drain.mjs alone, chains of 5: every job completes once, each kept.
func TestBullMQScriptAlone(t *testing.T) {
	t.Parallel()
	pkg := requireBullMQ(t)
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pkg.node, "drain.mjs", "--n", "100", "--k", "5", "--warmup", "0", "--concurrency", "4",
		"--mode", "kept", "--prefix", "t")
	cmd.Dir = pkg.dir
	cmd.Env = append(os.Environ(), "BENCH_REDIS_URL="+srv.URL())
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var d bullmqLine
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &d), "%s", out)
	require.Equal(t, "drained", d.Phase)
	require.Equal(t, 100, d.Drained)
	require.Equal(t, 100, d.CompletedKept)
	require.Zero(t, d.Failed)
	require.Greater(t, d.DrainS, 0.0)
	require.Greater(t, d.CPUUserUS+d.CPUSysUS, int64(0))
}

// Without the npm package (or node), the bench still runs Asynq and baton
// and says, in the table and the JSON, that BullMQ was skipped and why.
func TestBullMQSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o, err := parseFlags([]string{"-bullmq-dir", dir}, func(string) string { return "" }, os.Stderr)
	require.NoError(t, err)
	_, skip := findBullMQ(o)
	if _, err := exec.LookPath("node"); err == nil {
		require.Contains(t, skip, "not installed (run npm ci there")
	} else {
		require.Equal(t, "node is not installed", skip)
	}
	o.rtt = time.Millisecond
	_, skip = findBullMQ(o)
	require.Contains(t, skip, "-rtt")

	srv := redistest.Start(t)
	code, stdout, stderr := runBench(t, srv.URL(), "-n", "50", "-runs", "1", "-warmup", "0", "-mode", "single",
		"-poll", "10ms", "-sections", "throughput", "-bullmq-dir", filepath.Join(dir, "none"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "bullmq: SKIPPED: ")
	require.Regexp(t, `baton +single +50 +\d+ +\d+ +\d+–\d+ +\d+\.\d\d +skipped +skipped +\d+\.\d\d +skipped `, stdout)
	require.Contains(t, stdout, "BullMQ: SKIPPED (")
	require.Regexp(t, `"bullmq":\{"skipped":"[^"]+"\}`, stdout)
	require.NotContains(t, stdout, "bullmq +flat")
}
