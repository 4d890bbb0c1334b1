package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/batonrun/baton/internal/chaos/check"
)

// result is a finished fault run and its check.
type result struct {
	cfg     config
	report  check.Report
	faults  []check.Fault
	final   map[string]check.RunFinal
	settle  time.Duration
	elapsed time.Duration
}

// faultCounts counts the faults by kind, stalls split at the lease: a stall
// shorter than the lease must cost nothing, a longer one a takeover.
func (r *result) faultCounts(ttl time.Duration) map[string]int {
	out := map[string]int{}
	for _, f := range r.faults {
		k := f.Kind
		if k == check.KindStall {
			if time.Duration(f.End-f.Start) >= ttl {
				k += "_long"
			} else {
				k += "_short"
			}
		}
		out[k]++
	}
	return out
}

// summary is the final JSON line.
type summary struct {
	Seed       uint64         `json:"seed"`
	DurationS  float64        `json:"duration_s"`
	Faults     map[string]int `json:"faults"`
	Runs       int            `json:"runs"`
	Nodes      int            `json:"nodes"`
	Ops        int            `json:"ops"`
	Violations int            `json:"violations"`
	// Threads sums up the conversations; absent without them.
	Threads *threadSummary `json:"threads,omitempty"`
	// Flow sums up the limits and waits; absent without them.
	Flow *flowSummary `json:"flow,omitempty"`
}

// flowSummary is the limits-and-waits part of the JSON line.
type flowSummary struct {
	Claims     map[string]int `json:"claims"`   // claims and takeovers under each limit
	MaxHeld    map[string]int `json:"max_held"` // most holders of each concurrency limit at once
	Parks      int            `json:"parks"`
	Resumed    int            `json:"resumed"`
	ResumeOps  int            `json:"resume_calls"`
	Replays    int            `json:"replays"`
	Changes    int            `json:"limit_changes"`
	Violations int            `json:"violations"`
}

// flowChecks are the limit and wait checks' names.
var flowChecks = map[string]bool{"limit_held": true, "limit_rate": true, "wait_answer": true, "wait_value": true}

func (r *result) flowSummary() *flowSummary {
	f := r.report.Flow
	if f == nil {
		return nil
	}
	out := &flowSummary{Claims: f.Claims, MaxHeld: f.MaxHeld, Parks: f.Parks, Resumed: f.Resumed,
		ResumeOps: f.ResumeOps, Replays: f.Replays, Changes: f.Changes}
	for _, v := range r.report.Violations {
		if flowChecks[v.Check] {
			out.Violations++
		}
	}
	return out
}

// threadSummary is the conversations' part of the JSON line.
type threadSummary struct {
	Threads     int            `json:"threads"`
	Runs        map[string]int `json:"runs"` // accepted, by strategy ("none": no thread)
	Busy        map[string]int `json:"busy"` // refused: thread busy
	Queued      int            `json:"queued"`
	Withdrawn   int            `json:"withdrawn"`
	Cancels     int            `json:"cancels"`
	Checkpoints int            `json:"checkpoints"`
	Rollbacks   int            `json:"rollbacks"`
	Resumes     int            `json:"resumes_checked"`
	Undecided   int            `json:"undecided"`
	Violations  int            `json:"violations"`
}

// threadChecks are the thread checks' names (check.Violation.Check).
var threadChecks = map[string]bool{"thread_active": true, "thread_queue": true, "interrupt": true, "rollback": true,
	"resume": true, "ckpt_version": true, "ckpt_fence": true, "ckpt_lost": true}

func (r *result) threadSummary() *threadSummary {
	t := r.report.Threads
	if t == nil {
		return nil
	}
	out := &threadSummary{Threads: t.Threads, Runs: t.Runs, Busy: t.Busy, Queued: t.Queued, Withdrawn: t.Withdrawn,
		Cancels: t.Cancels, Checkpoints: t.Checkpoints, Rollbacks: t.Rollbacks, Resumes: t.Resumes,
		Undecided: t.Undecided}
	for _, v := range r.report.Violations {
		if threadChecks[v.Check] {
			out.Violations++
		}
	}
	return out
}

func countList(m map[string]int) string {
	var s string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf(" %s %d", k, m[k])
	}
	if s == "" {
		return " none"
	}
	return s
}

// print writes the human summary, every violation, then the JSON line.
func (r *result) print(w io.Writer) {
	rep := r.report
	counts := r.faultCounts(defaultTiming.LeaseTTL)
	status := map[string]int{}
	for _, f := range r.final {
		if f.Info != nil {
			status[f.Info.Status]++
		} else {
			status["missing"]++
		}
	}
	fmt.Fprintf(w, "chaos: seed %d, %s of faults on %d runners, %s in all (settle %s)\n",
		r.cfg.seed, r.cfg.duration, r.cfg.runners, r.elapsed.Round(time.Second), r.settle.Round(time.Millisecond))
	fmt.Fprintf(w, "  out:        %s\n", r.cfg.out)
	fmt.Fprintf(w, "  faults:     %d —", len(r.faults))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, " %s %d", k, counts[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  runs:       %d —", len(r.final))
	for _, k := range slices.Sorted(maps.Keys(status)) {
		fmt.Fprintf(w, " %s %d", k, status[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  nodes:      %d\n", rep.Nodes)
	failed := 0
	for _, id := range slices.Sorted(maps.Keys(r.final)) {
		f := r.final[id]
		if f.Info == nil {
			continue
		}
		for _, n := range f.Info.Nodes {
			if n.State != "FAILED" {
				continue
			}
			if failed++; failed <= 10 {
				fmt.Fprintf(w, "    FAILED %s/%s after %d/%d attempts: %s\n", id, n.ID, n.Attempt, n.MaxAttempts, n.Error)
			}
		}
	}
	if failed > 10 {
		fmt.Fprintf(w, "    ... %d FAILED nodes in all\n", failed)
	}
	fmt.Fprintf(w, "  history:    %d operations on %d nodes (%d needed a killed runner's lost line)\n",
		rep.Ops, rep.Partitions, rep.Phantoms)
	fmt.Fprintf(w, "  takeovers:  %d, longest %s (bound %s)\n", rep.Takeovers, rep.MaxTakeover.Round(time.Millisecond),
		check.Bounds{LeaseTTL: defaultTiming.LeaseTTL, Grace: defaultTiming.Grace, Sweep: defaultTiming.Sweep,
			Slack: r.cfg.slack}.Takeover())
	fmt.Fprintf(w, "  downstream: %d tokens admitted\n", rep.Admits)
	if ts := r.threadSummary(); ts != nil {
		t := rep.Threads
		fmt.Fprintf(w, "  threads:    %d — runs by strategy:%s; refused busy:%s\n", ts.Threads, countList(ts.Runs), countList(ts.Busy))
		fmt.Fprintf(w, "              %d queued (%d withdrawn), %d cancels; %d checkpoints accepted, %d read back\n",
			ts.Queued, ts.Withdrawn, ts.Cancels, ts.Checkpoints, t.Sampled)
		fmt.Fprintf(w, "              rollbacks applied %d (rolled_back events %d); attempt starts checked %d, undecided %d; thread violations %d\n",
			ts.Rollbacks, t.RolledBackEvents, ts.Resumes, ts.Undecided, ts.Violations)
	}
	if fs := r.flowSummary(); fs != nil {
		fmt.Fprintf(w, "  limits:     claims:%s; most held at once:%s; %d changes\n", countList(fs.Claims),
			countList(fs.MaxHeld), fs.Changes)
		fmt.Fprintf(w, "  waits:      %d parked, %d resumed; %d resume calls, %d answered as a replay; flow violations %d\n",
			fs.Parks, fs.Resumed, fs.ResumeOps, fs.Replays, fs.Violations)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "  violations: none")
	} else {
		fmt.Fprintf(w, "  violations: %d\n", len(rep.Violations))
		for _, v := range rep.Violations {
			fmt.Fprintf(w, "    %s\n", v)
		}
	}
	line, _ := json.Marshal(summary{Seed: r.cfg.seed, DurationS: r.cfg.duration.Seconds(), Faults: counts,
		Runs: len(r.final), Nodes: rep.Nodes, Ops: rep.Ops, Violations: len(rep.Violations), Threads: r.threadSummary(),
		Flow: r.flowSummary()})
	fmt.Fprintln(w, string(line))
}
