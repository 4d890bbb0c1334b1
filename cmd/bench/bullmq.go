package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// BullMQ is the fenced peer a user would pick instead of baton: its worker
// holds a lock token per job and completes a job only under it. The bench
// measures it beside bare Asynq and baton, on the same Redis in the same
// run, through the npm package in cmd/bench/bullmq: a node process drains
// the jobs (BullMQ has no Go client), and the bench reads Redis's own
// counters (serverStats, usedMemory) around the drain, as it does for the
// other two.

// bullmqScenario is BullMQ in one shape: N independent no-op jobs (flat),
// or N/k chains whose processors add the next job (chain, as Asynq's chain
// baseline), with completed jobs kept (removeOnComplete: false) or removed
// by the script that completes them (true).
type bullmqScenario struct {
	o       options
	t       *target
	pkg     bullmqPackage
	chain   bool
	removed bool
}

func (s *bullmqScenario) system() string { return "bullmq" }

func (s *bullmqScenario) mode() string {
	m := "flat"
	if s.chain {
		m = fmt.Sprintf("chain k=%d", s.o.k)
	}
	if s.removed {
		return m + " removed"
	}
	return m + " kept"
}

// bullmqPackage is the installed npm package.
type bullmqPackage struct {
	node    string // node's path
	dir     string // the package's directory
	version string // bullmq's, as installed
}

// findBullMQ locates node and the installed package, or says why BullMQ is
// not measured.
func findBullMQ(o options) (bullmqPackage, string) {
	switch {
	case !o.bullmq:
		return bullmqPackage{}, "-bullmq=false"
	case !o.has("throughput"):
		return bullmqPackage{}, "the throughput section is not run"
	case len(o.clusterAddrs) > 0:
		return bullmqPackage{}, "not measured on a cluster (BullMQ wants its prefix as a hash tag)"
	case o.rtt > 0:
		return bullmqPackage{}, "-rtt delays only the Go clients' round trips, not node's"
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return bullmqPackage{}, "node is not installed"
	}
	dir := o.bullmqDir
	if dir == "" {
		dir = "cmd/bench/bullmq" // go run ./cmd/bench from the repository's root
		if _, src, _, ok := runtime.Caller(0); ok {
			if d := filepath.Join(filepath.Dir(src), "bullmq"); exists(d) {
				dir = d
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "bullmq", "package.json"))
	if err != nil {
		return bullmqPackage{}, fmt.Sprintf("the npm package in %s is not installed (run npm ci there; make bench does)", dir)
	}
	var pj struct{ Version string }
	_ = json.Unmarshal(b, &pj)
	return bullmqPackage{node: node, dir: dir, version: pj.Version}, ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// bullmqLine is one line drain.mjs prints.
type bullmqLine struct {
	Phase         string  `json:"phase"`
	Jobs          int     `json:"jobs"`
	Drained       int     `json:"drained"`
	DrainS        float64 `json:"drain_s"`
	SubmitS       float64 `json:"submit_s"`
	CPUUserUS     int64   `json:"cpu_user_us"`
	CPUSysUS      int64   `json:"cpu_sys_us"`
	CompletedKept int     `json:"completed_kept"`
	Failed        int     `json:"failed"`
	Left          int     `json:"left"`
}

// measureBullMQ runs one measurement of s in a node process on an empty
// database. The process warms up, pauses its queue and says so; the bench
// reads used_memory; the process adds every job and says so; the bench
// reads Redis's counters and the host's CPU; the process resumes the queue
// and reports its drain. Redis's figures are read here, the drain time and
// node's CPU by the process itself.
func (b *bench) measureBullMQ(ctx context.Context, s *bullmqScenario) (res result, err error) {
	res = result{system: s.system(), mode: s.mode(), child: true}
	if err := b.t.flush(ctx); err != nil {
		return res, err
	}
	redisURL, err := withDB(b.o.redisURL, b.o.db)
	if err != nil {
		return res, err
	}
	mode, k := "kept", 1
	if s.removed {
		mode = "removed"
	}
	if s.chain {
		k = b.o.k
	}
	ctx, cancel := context.WithTimeout(ctx, 3*b.o.timeout) // warm-up, fill and drain
	defer cancel()
	cmd := exec.CommandContext(ctx, s.pkg.node, "drain.mjs", "--handshake", "--mode", mode, "--k", strconv.Itoa(k),
		"--n", strconv.Itoa(b.o.n), "--warmup", strconv.Itoa(b.o.warmup), "--concurrency", strconv.Itoa(b.o.concurrency),
		"--submitters", strconv.Itoa(b.o.submitters), "--timeout-s", strconv.Itoa(int(b.o.timeout.Seconds())))
	cmd.Dir = s.pkg.dir
	cmd.Env = append(os.Environ(), "BENCH_REDIS_URL="+redisURL) // not in argv: a password stays out of ps
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start node: %w", err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = stdin.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w; drain.mjs said: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
	}()
	lines := bufio.NewScanner(stdout)
	next := func(phase string) (bullmqLine, error) {
		var l bullmqLine
		if !lines.Scan() {
			return l, fmt.Errorf("drain.mjs ended before %q (read error: %v)", phase, lines.Err())
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Phase != phase {
			return l, fmt.Errorf("drain.mjs: want phase %q, got %q", phase, lines.Text())
		}
		return l, nil
	}
	goOn := func() error {
		_, err := stdin.Write([]byte("\n"))
		return err
	}

	if _, err := next("ready"); err != nil {
		return res, err
	}
	m0, err := b.t.usedMemory(ctx)
	if err != nil {
		return res, err
	}
	if err := goOn(); err != nil {
		return res, err
	}
	filled, err := next("filled")
	if err != nil {
		return res, err
	}
	s1, err := b.t.serverStats(ctx)
	if err != nil {
		return res, err
	}
	host1 := readHostCPU()
	if err := goOn(); err != nil {
		return res, err
	}
	d, err := next("drained")
	if err != nil {
		return res, err
	}
	host2 := readHostCPU()
	s2, err := b.t.serverStats(ctx)
	if err != nil {
		return res, err
	}
	m1, err := b.t.usedMemory(ctx)
	if err != nil {
		return res, err
	}
	_ = stdin.Close()
	exited = true
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("drain.mjs: %w", err)
	}

	want := filled.Jobs
	switch {
	case d.Drained != want || d.Failed != 0 || d.Left != 0:
		return res, fmt.Errorf("bullmq %s: %d of %d jobs completed, %d failed, %d left", s.mode(), d.Drained, want, d.Failed, d.Left)
	case s.removed && d.CompletedKept != 0:
		return res, fmt.Errorf("bullmq %s: %d completed jobs kept, want none", s.mode(), d.CompletedKept)
	case !s.removed && d.CompletedKept < want:
		return res, fmt.Errorf("bullmq %s: %d completed jobs kept, want at least %d", s.mode(), d.CompletedKept, want)
	}
	res.nodes = want
	res.submit = time.Duration(filled.SubmitS * float64(time.Second))
	res.drain = time.Duration(d.DrainS * float64(time.Second))
	res.proc = time.Duration(d.CPUUserUS+d.CPUSysUS) * time.Microsecond
	res.server = s2.since(s1)
	res.steal, res.busy = host2.stealSince(host1), host2.busySince(host1)
	res.memPerNode = float64(m1-m0) / float64(want)
	return res, nil
}

// withDB is a Redis URL naming database db instead of the URL's own.
func withDB(raw string, db int) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("redis url: %w", errors.New("cannot parse it"))
	}
	u.Path = "/" + strconv.Itoa(db)
	return u.String(), nil
}
