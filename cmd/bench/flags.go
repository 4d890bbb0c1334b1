package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/runner"
)

// options are the bench's flags and environment.
type options struct {
	n           int           // nodes (tasks) per measurement
	concurrency int           // handlers at once, both systems
	poll        time.Duration // idle poll interval, both systems
	mode        string        // single, wide, chain, cancel or all
	k           int           // nodes per run in wide and chain modes
	runs        int           // measurements of each system and mode
	warmup      int           // nodes (tasks) before each measurement
	submitters  int           // goroutines that enqueue or submit
	db          int           // the Redis database the bench owns
	flush       bool          // FLUSHDB the database even if it holds keys
	redisURL    string        // REDIS_URL
	readyAfter  time.Duration // the worker's ReadyThreshold; zero: its default
	cpuProfile  string        // directory for CPU profiles of the first drains
	timeout     time.Duration // bound on each phase
	verbose     bool          // print each round and the command breakdown
	logLevel    slog.Level    // the worker's log level
	resp        int           // go-redis protocol version, both systems
	rtt         time.Duration // added to every round trip, both systems: a network in between
	cancels     int           // running nodes cancelled per kind for the cancel latency; 0: none

	sections     []string      // what to measure, in this order
	ownRedis     bool          // start a redis-server of the bench's own on a free port
	callgrind    bool          // run the own redis-server under callgrind and count its instructions
	cluster      int           // start a Redis Cluster of this many masters of the bench's own; 0: none
	clusterAddrs []string      // REDIS_CLUSTER_ADDRS, or the own cluster's nodes
	queues       int           // Asynq queues both systems spread their work over
	dispatchers  []int         // baton throughput rows, one per value; 0: the worker's default
	rate         int           // nodes/s of the latency section
	latencyFor   time.Duration // length of each latency measurement
	latencyPoll  time.Duration // TaskCheckInterval in the latency section; 0: the worker's default
	takeovers    int           // SIGKILL-like takeovers measured
	takeoverTTL  time.Duration // lease TTL of the takeover section
	hbNodes      int           // long-running nodes on one worker in the heartbeat section
	memNodes     int           // finished nodes of the memory section
	sweepNodes   int           // finished nodes present in the sweep section
	scriptCalls  int           // calls of each operation in the scripts section
	bullmq       bool          // measure BullMQ beside Asynq and baton (node and the npm package in cmd/bench/bullmq)
	noTake       bool          // the baton worker takes no node from the queue in a commit (WorkerConfig.NoTake)
	bullmqDir    string        // the npm package's directory; "": cmd/bench/bullmq
	traceSample  []float64     // one more baton row per ratio, traced at that sampling
}

// allSections are the bench's sections, in the order they run.
var allSections = []string{"throughput", "limits", "scripts", "latency", "cancel", "takeover", "heartbeat", "memory", "sweep"}

func (o options) has(section string) bool { return slices.Contains(o.sections, section) }

// modes are the baton shapes; "all" runs each.
var modes = []string{"single", "thread", "wide", "chain"}

const usageText = `usage: bench [flags]

Drains N no-op tasks through bare Asynq and N no-op nodes through a baton
worker on the same Redis, and prints throughput, baton/asynq and Redis round
trips per task. Tasks are enqueued (runs submitted) while the queue is
paused; the drain clock runs from the first delivery to the last task's end
and, for baton, every finished run retained.

Modes (baton): single = N runs of one node; thread = N runs of one node, each
of a thread of its own (a LangGraph turn: its locator lives in another slot);
wide = N/k runs of k independent nodes; chain = N/k runs of k nodes in a chain
(each commit enqueues the next).
Asynq's baseline is N independent tasks, or for chain N/k chains of k tasks
whose handlers enqueue the next one.

BullMQ (-bullmq, on by default): the same two baselines drained by one
BullMQ Worker at the same concurrency, with completed jobs kept
(removeOnComplete: false) and removed (true), in a node process of the npm
package in cmd/bench/bullmq (make bench runs npm ci there). Baton rows get
×bullmq next to ×asynq. Skipped, saying so, without node or the installed
package, on a cluster and with -rtt.

Cancel latency: after the throughput table (or alone with -mode cancel), the
bench cancels -cancels running nodes of each kind (a Go handler, an exec
command) one at a time under the worker's default lease, and prints the time
from the cancel call to the run being CANCELLED (p50, p99, max).

Sections (-sections, default all, in this order): throughput (the table
above), limits (the claim cost of fleet-wide limits: baton's single shape
drained with every node naming a concurrency limit and a rate, neither
of which throttles, against the same runs without, on a single server
or a Redis Cluster), scripts (Redis CPU and commands per call of each operation called
alone), latency (submit-to-start and claim-to-commit p50/p99 at a fixed
-rate), cancel, takeover (a killed worker's node taken over), heartbeat
(round trips per tick with -hb-nodes running nodes on one worker), memory
(Redis bytes per finished, retained node), sweep (a sweeper pass with no
finished nodes and with -sweep-nodes present). The last line of the output
is one JSON object with every section's figures.

Redis: REDIS_URL (default redis://127.0.0.1:6379/0) names the server; the
bench uses database -db instead of the URL's, FLUSHDBs it before each
measurement and at the end, and refuses a database holding keys unless
-flush is given. -own-redis starts a redis-server of its own on a free
port instead (commandstats, CPU and memory are then the bench's alone).

Cluster: -cluster N starts N masters of its own on loopback (one master:
every slot on it), or REDIS_CLUSTER_ADDRS names a cluster; both systems
get a cluster client, the bench FLUSHDBs every master, and Redis CPU and
commandstats are summed over the masters. memory and sweep are skipped
there (they read one server's used_memory). Asynq keeps a queue in one
slot: with -queues 1 bare Asynq's queue lives on one master.

Instructions: -callgrind runs the bench's own redis-server under valgrind's
callgrind (valgrind must be installed) and adds to the scripts section the
instructions Redis executes per call. Times on a shared host drift by tens
of percent; these counts repeat to within 1-3% whatever the host does, so a
change of a few percent in a script shows. They leave out the kernel's
share (reading and writing sockets), which weighs more in Asynq's cheap
commands than in baton's scripts: compare baton with baton, not with Asynq.

Flags:
`

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.n, "n", 20000, "nodes (tasks) per measurement")
	fs.IntVar(&o.concurrency, "concurrency", 16, "handlers at once, for both systems")
	fs.DurationVar(&o.poll, "poll", runner.DefaultPollInterval, "idle queue poll interval (TaskCheckInterval), for both systems; default: the worker's")
	fs.StringVar(&o.mode, "mode", "single", "baton shape: single, thread, wide, chain or all; cancel: the cancel latency alone")
	fs.IntVar(&o.cancels, "cancels", 50, "running nodes cancelled per kind to measure cancel latency (0: skip)")
	fs.IntVar(&o.k, "k", 10, "nodes per run in wide and chain modes (1 to 1000)")
	fs.IntVar(&o.runs, "runs", 3, "measurements of each system and mode; the table shows medians")
	fs.IntVar(&o.warmup, "warmup", 2000, "nodes (tasks) processed before each measurement")
	fs.IntVar(&o.submitters, "submitters", 8, "goroutines enqueueing tasks or submitting runs")
	fs.IntVar(&o.db, "db", 15, "Redis database the bench owns and empties (0 to 15)")
	fs.BoolVar(&o.flush, "flush", false, "FLUSHDB the database even if it holds keys")
	fs.DurationVar(&o.readyAfter, "ready-threshold", 0, "the worker's ReadyThreshold (0: its default, 15s)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "directory for CPU profiles of each system's first drain (<system>-<mode>.pprof)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on each submit, warm-up and drain")
	fs.BoolVar(&o.verbose, "v", false, "print each round and the Redis commands per node")
	fs.IntVar(&o.resp, "resp", 3, "Redis protocol the client speaks, for both systems: 2 or 3 (go-redis's default)")
	fs.DurationVar(&o.rtt, "rtt", 0, "delay added to every Redis round trip of both systems, as a network between workers and Redis would")
	sections := fs.String("sections", strings.Join(allSections, ","), "comma-separated sections to run: "+strings.Join(allSections, ", ")+" (or all)")
	fs.BoolVar(&o.ownRedis, "own-redis", false, "start a redis-server of the bench's own on a free port (no persistence) instead of REDIS_URL's")
	fs.BoolVar(&o.callgrind, "callgrind", false, "start the bench's own redis-server (-own-redis) under valgrind's callgrind and add the instructions Redis executes per call to the scripts section, the only section it runs")
	fs.IntVar(&o.cluster, "cluster", 0, "start a Redis Cluster of this many masters of the bench's own on loopback (no persistence, no replicas) instead of REDIS_URL's server; 0: none")
	fs.IntVar(&o.queues, "queues", 1, "Asynq queues both systems spread tasks (runs) over, round robin (1: \"default\"; more: names whose slots spread over a cluster's masters)")
	disp := fs.String("dispatchers", "0", "comma-separated WorkerConfig.Dispatchers values: one baton throughput row each, the first also in the latency section (0: the worker's default)")
	fs.IntVar(&o.rate, "rate", 2000, "nodes/s submitted in the latency section")
	fs.DurationVar(&o.latencyFor, "latency-for", 5*time.Second, "length of each latency measurement")
	fs.DurationVar(&o.latencyPoll, "latency-poll", 0, "TaskCheckInterval in the latency section, both systems (0: the worker's default)")
	fs.IntVar(&o.takeovers, "takeovers", 3, "takeovers measured after a worker is killed")
	fs.DurationVar(&o.takeoverTTL, "takeover-ttl", 3*time.Second, "lease TTL in the takeover section (grace and sweep interval: the worker's defaults, 1s)")
	fs.IntVar(&o.hbNodes, "hb-nodes", 1000, "long-running nodes on one worker in the heartbeat section")
	fs.IntVar(&o.memNodes, "mem-nodes", 10000, "finished no-op nodes in the memory section (runs of one node and of k nodes)")
	fs.IntVar(&o.scriptCalls, "script-calls", 1000, "calls of each operation in the scripts section")
	fs.IntVar(&o.sweepNodes, "sweep-nodes", 1000000, "finished nodes present in the sweep section (copies of a finished run; about 1 GiB of Redis memory per million)")
	fs.BoolVar(&o.noTake, "no-take", false, "baton's worker takes no node from the queue in a commit (runner.WorkerConfig.NoTake): every node comes through its own delivery, as before taking existed")
	fs.BoolVar(&o.bullmq, "bullmq", true, "measure BullMQ in the throughput section too, in a node process (skipped, saying so, without node or the npm package)")
	fs.StringVar(&o.bullmqDir, "bullmq-dir", "", "directory of the bench's BullMQ npm package, installed with npm ci (default: cmd/bench/bullmq)")
	level := fs.String("log-level", "warn", "the worker's log level (debug, info, warn, error)")
	traceSample := fs.String("trace-sample", "", "comma-separated sampling ratios (0 to 1): one more baton row each in the throughput section, its first shape, with OpenTelemetry tracing on and spans exported over OTLP/HTTP to a local endpoint that drops them (e.g. 0.1)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.redisURL = cmp.Or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0")
	if a := getenv("REDIS_CLUSTER_ADDRS"); a != "" && !o.ownRedis && o.cluster == 0 {
		o.clusterAddrs = strings.Split(a, ",")
	}
	var errs []error
	if *sections == "all" {
		*sections = strings.Join(allSections, ",")
	}
	for _, sec := range strings.Split(*sections, ",") {
		sec = strings.TrimSpace(sec)
		if !slices.Contains(allSections, sec) {
			errs = append(errs, fmt.Errorf("-sections: unknown section %q (want %s)", sec, strings.Join(allSections, ", ")))
		} else if !slices.Contains(o.sections, sec) {
			o.sections = append(o.sections, sec)
		}
	}
	for _, d := range strings.Split(*disp, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || v < 0 || v > 16 {
			errs = append(errs, fmt.Errorf("-dispatchers %q: want comma-separated numbers 0 to 16", *disp))
			break
		}
		o.dispatchers = append(o.dispatchers, v)
	}
	if *traceSample != "" {
		for _, r := range strings.Split(*traceSample, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if err != nil || v < 0 || v > 1 {
				errs = append(errs, fmt.Errorf("-trace-sample %q: want comma-separated ratios from 0 to 1", *traceSample))
				break
			}
			o.traceSample = append(o.traceSample, v)
		}
	}
	if o.mode == "cancel" { // the old spelling of -sections cancel
		o.sections = []string{"cancel"}
	}
	if o.callgrind {
		o.ownRedis = true
	}

	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		errs = append(errs, fmt.Errorf("-log-level %q: want debug, info, warn or error", *level))
	}
	if err := errors.Join(append(errs, o.validate())...); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "bench:", line)
		}
		return o, err
	}
	return o, nil
}

// validate returns every problem at once.
func (o options) validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("-%s %d: want at least 1", name, v))
		}
	}
	positive("n", o.n)
	positive("concurrency", o.concurrency)
	positive("runs", o.runs)
	positive("submitters", o.submitters)
	if o.k < 1 || o.k > 1000 {
		errs = append(errs, fmt.Errorf("-k %d: want 1 to 1000 (a run holds at most 1000 nodes)", o.k))
	}
	if o.warmup < 0 {
		errs = append(errs, fmt.Errorf("-warmup %d: want 0 or more", o.warmup))
	}
	if o.poll <= 0 {
		errs = append(errs, fmt.Errorf("-poll %s: want a positive duration", o.poll))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout %s: want a positive duration", o.timeout))
	}
	if o.readyAfter < 0 {
		errs = append(errs, fmt.Errorf("-ready-threshold %s: want 0 or a positive duration", o.readyAfter))
	}
	if o.resp != 2 && o.resp != 3 {
		errs = append(errs, fmt.Errorf("-resp %d: want 2 or 3", o.resp))
	}
	if o.db < 0 || o.db > 15 {
		errs = append(errs, fmt.Errorf("-db %d: want 0 to 15", o.db))
	}
	if o.mode != "all" && o.mode != "cancel" && !slices.Contains(modes, o.mode) {
		errs = append(errs, fmt.Errorf("-mode %q: want %s, cancel or all", o.mode, strings.Join(modes, ", ")))
	}
	if o.rate < 1 || o.latencyFor <= 0 || o.takeovers < 1 || o.takeoverTTL < 300*time.Millisecond ||
		o.hbNodes < 1 || o.memNodes < 1 || o.scriptCalls < 1 || o.sweepNodes < 0 || o.latencyPoll < 0 {
		errs = append(errs, errors.New("-rate, -latency-for, -takeovers, -hb-nodes, -mem-nodes and -script-calls want positive values, -takeover-ttl at least 300ms, -sweep-nodes and -latency-poll 0 or more"))
	}
	if o.cluster < 0 || o.cluster == 2 || o.cluster > 16 {
		errs = append(errs, fmt.Errorf("-cluster %d: want 0 (none), 1, or 3 to 16 masters (redis-cli --cluster create wants 3 at least)", o.cluster))
	}
	if o.cluster > 0 && o.ownRedis {
		errs = append(errs, errors.New("-cluster and -own-redis: choose one"))
	}
	if o.callgrind && (o.cluster > 0 || !slices.Equal(o.sections, []string{"scripts"})) {
		errs = append(errs, errors.New("-callgrind counts the instructions of one own redis-server in the scripts section: give -sections scripts, without -cluster"))
	}
	if o.queues < 1 || o.queues > 16 {
		errs = append(errs, fmt.Errorf("-queues %d: want 1 to 16", o.queues))
	}
	if o.cancels < 0 || (o.mode == "cancel" && o.cancels == 0) {
		errs = append(errs, fmt.Errorf("-cancels %d: want 0 or more (at least 1 with -mode cancel)", o.cancels))
	}
	return errors.Join(errs...)
}

// batonModes are the throughput modes this invocation measures.
func (o options) batonModes() []string {
	switch o.mode {
	case "all":
		return modes
	case "cancel":
		return nil
	}
	return []string{o.mode}
}
