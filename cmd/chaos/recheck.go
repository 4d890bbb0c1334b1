package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/batonrun/baton/internal/chaos/check"
)

// meta is what a fault run leaves in meta.json besides the logs, so that
// -recheck can judge it again (a checker fixed after a run, a post-mortem).
type meta struct {
	Seed      uint64  `json:"seed"`
	DurationS float64 `json:"duration_s"`
	Runners   int     `json:"runners"`
	Agents    int     `json:"agents,omitempty"`
	Threads   int     `json:"threads,omitempty"`
	// Workers: the slots' queues and concurrency; absent in runs from
	// before it was recorded, then derived from Runners and Agents.
	Workers   []check.Worker    `json:"workers,omitempty"`
	Submitted []string          `json:"submitted"`
	Refused   map[string]string `json:"refused,omitempty"`
	SettleMS  int64             `json:"settle_ms"`
	ElapsedMS int64             `json:"elapsed_ms"`
}

// inputFrom reads a finished run's out dir into the checker's input.
func inputFrom(out string, slack time.Duration) (check.Input, meta, error) {
	var m meta
	in := check.Input{OutDir: out, Runs: map[string]check.RunFinal{}, Dependents: map[string]map[string][]string{},
		Bounds: check.Bounds{LeaseTTL: defaultTiming.LeaseTTL, Grace: defaultTiming.Grace,
			Sweep: defaultTiming.Sweep, Slack: slack}}
	b, err := os.ReadFile(filepath.Join(out, "meta.json"))
	if err != nil {
		return in, m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return in, m, fmt.Errorf("meta.json: %w", err)
	}
	in.Submitted, in.SubmitRefused, in.Workers = m.Submitted, m.Refused, m.Workers
	if len(in.Workers) == 0 {
		for i := range m.Runners + m.Agents {
			s := &runnerSlot{id: fmt.Sprintf("r%d", i+1), exe: "runner"}
			if i >= m.Runners {
				s.id, s.exe = fmt.Sprintf("a%d", i-m.Runners+1), "agent"
			}
			in.Workers = append(in.Workers, s.worker())
		}
	}
	if in.Ops, err = check.ReadHistoryDir(filepath.Join(out, "history")); err != nil {
		return in, m, err
	}
	if in.Admits, err = check.ReadAdmits(filepath.Join(out, "admits.jsonl")); err != nil {
		return in, m, err
	}
	if err := readLines(filepath.Join(out, "faults.jsonl"), func(f check.Fault) { in.Faults = append(in.Faults, f) }); err != nil {
		return in, m, err
	}
	// threads.json: what the conversations recorded; absent without them.
	if err := readLines(filepath.Join(out, "threads.json"), func(t *check.ThreadInput) { in.Threads = t }); err != nil &&
		!os.IsNotExist(err) {
		return in, m, err
	}
	// flow.json: what the limits-and-waits workload recorded; absent without it.
	if err := readLines(filepath.Join(out, "flow.json"), func(f *check.FlowInput) { in.Flow = f }); err != nil &&
		!os.IsNotExist(err) {
		return in, m, err
	}
	err = readLines(filepath.Join(out, "runs.jsonl"), func(r finalRecord) {
		if r.Run == nil {
			return
		}
		in.Runs[r.Run.ID] = check.RunFinal{Info: r.Run, Events: r.Events}
		deps := map[string][]string{}
		for _, n := range r.Run.Nodes {
			for _, d := range n.Deps {
				deps[d] = append(deps[d], n.ID)
			}
		}
		in.Dependents[r.Run.ID] = deps
	})
	return in, m, err
}

func readLines[T any](path string, each func(T)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		each(v)
	}
	return sc.Err()
}

// recheck judges a finished run's out dir again.
func recheck(out string, slack time.Duration) (*result, error) {
	in, m, err := inputFrom(out, slack)
	if err != nil {
		return nil, err
	}
	cfg := config{seed: m.Seed, duration: time.Duration(m.DurationS * float64(time.Second)), runners: m.Runners,
		out: out, slack: slack}
	return &result{cfg: cfg, report: check.Check(in), faults: in.Faults, final: in.Runs,
		settle: time.Duration(m.SettleMS) * time.Millisecond, elapsed: time.Duration(m.ElapsedMS) * time.Millisecond}, nil
}
