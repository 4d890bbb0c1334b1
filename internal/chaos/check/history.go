package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Outcomes of an operation as its caller saw it.
const (
	OK      = "ok"      // the script accepted
	Refused = "refused" // the script answered with a refusal code (Op.Err)
	Unknown = "unknown" // no reply arrived: the script may or may not have run
)

// Op is one script call as a runner saw it: one line of a HISTORY_FILE.
// Call and Ret are time.Now().UnixNano() before the request was sent and
// after the reply (or the error) came back, on the same machine for every
// process, so they order operations across runners.
type Op struct {
	Worker  string `json:"worker"`
	Op      string `json:"op"` // claim, heartbeat, commit, fail, release, expire
	Thread  string `json:"thread"`
	Run     string `json:"run"`
	Node    string `json:"node"`
	Epoch   int64  `json:"epoch"` // claim: the epoch granted (0 unless ok)
	Attempt int64  `json:"attempt"`
	Claim   string `json:"claim"` // claim: the id offered; others: the lease's
	Call    int64  `json:"call"`
	Ret     int64  `json:"ret"`
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`
	Replay  bool   `json:"replay,omitempty"`
	Next    *Next  `json:"next,omitempty"` // commit: the continuation it claimed
	End     string `json:"end,omitempty"`  // fail/release/expire: retrying, failed, cancelled

	// Source names the process incarnation that wrote the line (its
	// history file's base name); set by the reader, not in the file.
	Source string `json:"-"`
	// Line is the line number in Source, for messages.
	Line int `json:"-"`
}

// Next is the dependent a commit claimed for its caller in the same step.
type Next struct {
	Thread string `json:"thread,omitempty"` // "": the commit's own
	Run    string `json:"run,omitempty"`    // "": the commit's own (a continuation)
	Node   string `json:"node"`
	Epoch  int64  `json:"epoch"`
	Claim  string `json:"claim"`
}

// Key names the node an operation is about.
func (o Op) Key() string { return o.Run + "/" + o.Node }

// NextRun is the run of the node a commit claimed for its caller: its own
// for a continuation, another for a node taken from the queue.
func (o Op) NextRun() string {
	if o.Next.Run != "" {
		return o.Next.Run
	}
	return o.Run
}

func (o Op) String() string {
	s := fmt.Sprintf("%s %s %s@%d/%s %s", o.Worker, o.Op, o.Key(), o.Epoch, short(o.Claim), o.Outcome)
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	if o.Replay {
		s += " replay"
	}
	if o.End != "" {
		s += " end=" + o.End
	}
	if o.Next != nil {
		s += fmt.Sprintf(" next=%s/%s@%d/%s", o.NextRun(), o.Next.Node, o.Next.Epoch, short(o.Next.Claim))
	}
	if o.Source != "" {
		s += fmt.Sprintf(" [%s:%d]", o.Source, o.Line)
	}
	return s
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

var knownOps = map[string]bool{"claim": true, "heartbeat": true, "commit": true, "fail": true,
	"release": true, "expire": true}

// ReadHistory reads one history file. source names its process incarnation;
// empty: the file's base name without extension. A torn last line (the
// process was killed mid-write) is skipped; any other malformed line is an
// error, since a history the checker cannot read is not a history it passed.
func ReadHistory(path, source string) ([]Op, error) {
	if source == "" {
		source = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var bad error
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if bad != nil { // a malformed line that was not the last one
			return nil, bad
		}
		var o Op
		if err := json.Unmarshal(b, &o); err != nil {
			bad = fmt.Errorf("%s:%d: %w", path, line, err)
			continue
		}
		if err := o.validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		o.Source, o.Line = source, line
		ops = append(ops, o)
	}
	return ops, sc.Err()
}

func (o Op) validate() error {
	switch {
	case !knownOps[o.Op]:
		return fmt.Errorf("unknown op %q", o.Op)
	case o.Outcome != OK && o.Outcome != Refused && o.Outcome != Unknown:
		return fmt.Errorf("unknown outcome %q", o.Outcome)
	case o.Run == "" || o.Node == "":
		return fmt.Errorf("op %s without run or node", o.Op)
	case o.Call == 0 || o.Ret < o.Call:
		return fmt.Errorf("op %s: call %d, ret %d", o.Op, o.Call, o.Ret)
	case o.Op == "claim" && o.Outcome == OK && o.Epoch < 1:
		return fmt.Errorf("claim ok without an epoch")
	}
	return nil
}

// ReadHistoryDir reads every *.jsonl file in dir, each as its own source.
func ReadHistoryDir(dir string) ([]Op, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var all []Op
	for _, f := range files {
		ops, err := ReadHistory(f, "")
		if err != nil {
			return nil, err
		}
		all = append(all, ops...)
	}
	return all, nil
}

// Admit is one decision of the downstream's guard: a line of ADMIT_LOG.
// Start and At are UnixNano before and after the guard decided.
type Admit struct {
	Token    string `json:"token"`
	Resource string `json:"resource"`
	Run      string `json:"run"`
	Node     string `json:"node"`
	Epoch    int64  `json:"epoch"`
	Claim    string `json:"claim"`
	Admitted bool   `json:"admitted"`
	Start    int64  `json:"start"`
	At       int64  `json:"at"`
	Err      string `json:"err,omitempty"`
}

// ReadAdmits reads an ADMIT_LOG file. A missing file is no admits.
func ReadAdmits(path string) ([]Admit, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Admit
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var a Admit
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			continue // a torn line from a killed process; decisions are not ours to invent
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// Fault is one fault the harness injected, on the harness's clock
// (UnixNano, the same machine clock the runners stamp histories with).
type Fault struct {
	Kind string `json:"kind"` // see the Kind* constants
	// Target is the runner slot ("r1") a process or proxy fault hit,
	// "redis" for Redis, or the node ("run/node") of a duplicate enqueue.
	Target string `json:"target"`
	// Source is the runner incarnation (history file base name) a process
	// fault hit.
	Source string `json:"source,omitempty"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"` // == Start for instant faults
}

// Fault kinds.
const (
	KindStop      = "runner_stop"      // SIGSTOP past the lease, then SIGCONT
	KindKill      = "runner_kill"      // SIGKILL, then a restart
	KindTerm      = "runner_term"      // SIGTERM (drain), then a restart
	KindReset     = "proxy_reset"      // every connection of one runner reset
	KindLostReply = "proxy_lost_reply" // requests forwarded, replies dropped
	KindStall     = "proxy_stall"      // traffic held, then delivered
	KindBlackhole = "proxy_blackhole"  // traffic swallowed, then connections closed
	KindRedisKill = "redis_kill"       // SIGKILL of redis-server, restart from AOF
	KindDuplicate = "dup_enqueue"      // an extra Asynq task for a live node
)

// IsProcess reports whether the fault stops the target's process.
func (f Fault) IsProcess() bool {
	return f.Kind == KindStop || f.Kind == KindKill || f.Kind == KindTerm
}

// IsLink reports whether the fault impairs the target's link to Redis.
func (f Fault) IsLink() bool {
	return f.Kind == KindReset || f.Kind == KindLostReply || f.Kind == KindStall || f.Kind == KindBlackhole
}
