package main

import (
	"flag"
	"fmt"
	"io"
)

// envHelp is the configuration table of `runner -h`; a test checks it
// names every variable Config reads.
const envHelp = `Environment (default in brackets):
  REDIS_URL           [redis://127.0.0.1:6379/0] one Redis for the queue and the run state; rediss:// for TLS
  REDIS_CLUSTER_ADDRS [none] a Redis Cluster instead: seed nodes host:port,host:port,...
  REDIS_SENTINEL_ADDRS [none] Sentinel instead: sentinels host:port,...; with REDIS_SENTINEL_MASTER
  REDIS_SENTINEL_MASTER [none] the primary's name the sentinels watch
  REDIS_SENTINEL_PASSWORD [none] the sentinels' own password
  REDIS_USERNAME      [none] ACL user of the data nodes (cluster and sentinel modes)
  REDIS_PASSWORD      [none] password of the data nodes (cluster and sentinel modes)
  REDIS_TLS           [false] TLS to every node (cluster and sentinel modes)
  REDIS_TLS_CA_FILE   [system roots] PEM file of the CAs to trust, in every mode with TLS
  RUNNER_ID           [host-pid-random] worker id in leases, events and logs ([A-Za-z0-9._-])
  CONCURRENCY         [10] nodes run at once
  DISPATCHERS         [3] Asynq dequeue loops (servers) in this process, CONCURRENCY divided among them
  POLL_INTERVAL       [10ms] how long an idle dequeue loop waits before polling Redis again (1ms to 10s)
  QUEUES              [default=1] queues and weights, e.g. critical=6,default=3,low=1
  LEASE_TTL           [30s] how long a claim or renewal is trusted
  HEARTBEAT_INTERVAL  [LEASE_TTL/3] lease renewal period; LEASE_TTL >= 3 x HEARTBEAT_INTERVAL
  GRACE               [1s] wait after a lease's end before a takeover
  SWEEP_INTERVAL      [1s] how often expired leases and forgotten READY nodes are looked for
  SHUTDOWN_TIMEOUT    [10s] how long SIGTERM waits for running nodes before releasing them
  SCHEDULE_INTERVAL   [1s] how often due cron schedules are fired; negative: none here
  SCHEDULE_LATE       [1m] how old a tick may be and still fire; older ones were missed
  ADMIN_ADDR          [127.0.0.1:8080] admin HTTP listen address; set empty to disable.
                      Unset and 8080 taken: the next free port up to 8100 (logged);
                      set and taken: the runner exits 1
  API_TOKEN           [none] bearer token for /v1/ and /monitor/ (>= 16 chars, random:
                      openssl rand -hex 32); required when ADMIN_ADDR is not loopback;
                      without it only callers on this machine are served
  TRUSTED_PROXY       [none] IPs/CIDRs of a TLS proxy in front: its X-Forwarded-Proto makes
                      the cookie Secure, its X-Forwarded-For names the client; needs API_TOKEN
  MONITOR_READ_ONLY   [false] the Asynq UI (/monitor/) answers GET and HEAD only
  EVENT_STREAMS_PER_CLIENT [8] live event streams one client address may hold (of 16)
  EVENT_STREAM_MAX_AGE [10m] a live event stream is closed after this; clients resume
  WEBHOOK_SECRET      [none] HMAC-SHA256 key of run webhooks (Baton-Signature); unset: unsigned
  LOG_LEVEL           [info] debug, info, warn or error
  LOG_FORMAT          [text] text or json
  MAX_INPUT_BYTES     [1048576] cap on each node's input in runs submitted through the API
  MAX_SPEC_BYTES      [8388608] cap on a whole run spec submitted through the API
  BATON_PREFIX        [baton] prefix of every Redis key; must match clients'
  RUN_RETENTION       [168h] how long a finished run stays readable; negative: forever
  THREAD_RETENTION    [720h] how long a thread's checkpoints live after their last write, and
                      while a node waits; at least 1m, negative: forever
  CHECKPOINT_HISTORY  [100] checkpoints kept per thread and namespace, the newest; 1 to 10000
  MAX_CHECKPOINT_BYTES [1048576] cap of a checkpoint, of a task's pending writes, of a wait's request
                      and of a resume's value; 1 KiB to 64 MiB
  READY_THRESHOLD     [15s] how long a READY node may wait unclaimed before it is enqueued again
  CLAIM_REPLICAS      [0] replicas that must acknowledge each claim and commit (WAIT) before it counts
  TAKE_FROM_QUEUE     [true] a commit may claim the queue's next node of its shard itself (one server)
  HISTORY_FILE        [none] append one JSON line per protocol call (for cmd/chaos)
  LIMITS_FILE         [none] JSON file of fleet-wide limits set at start (docs/flow-control.md)
  LANGGRAPH_CONFIG    [none] a LangGraph project's langgraph.json: its graphs run as kind "graph" (docs/graph-workers.md)
  AGENT_API_ADDR      [127.0.0.1:2024] the Agent Server API's listen address when LANGGRAPH_CONFIG is set
                      (a free port when 2024 is taken); set empty to disable (docs/agent-server.md).
  LANGGRAPH_PYTHON    [python3] the interpreter of the project's Python graphs (its virtualenv's)
  LANGGRAPH_NODE      [node] the node binary of the project's JS graphs (.ts and .mts through tsx)
  LANGGRAPH_JS_WORKER [node_modules/@baton/langgraph-saver/src/worker.js] the JS graph worker's script
  LANGGRAPH_MAX_ATTEMPTS [CONCURRENCY] graph attempts the worker process runs at once
  TRACE_URL           [none] a tracing UI's URL with {trace_id}: the run view links to each run's trace
  KINDS               [exec,http,sleep,noop] the stock kinds this runner runs
  EGRESS_ALLOW        [none] private CIDRs, addresses, hosts http nodes and webhooks may reach
  EXEC_ENV            [none] runner variables commands get besides PATH, HOME, LANG, TZ
  EXEC_ENV_REFS       [none] runner variables an exec env's {"$env": NAME} may read
  EXEC_FILE_DIRS      [none] directories an exec env's {"$file": PATH} may read under
  EXEC_STORE_COMMANDS [none] commands (argv0, or *) given the runner's Redis (BATON_REDIS_URL)
  REDACT_ENV          [none] runner variables whose values are redacted from results and errors
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_*  [none] export traces over OTLP/HTTP (docs/observability.md)
`

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, "Usage: runner [--embedded] [--version]\n\nbaton's worker and admin server.\n\nFlags:\n")
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+envHelp+"\nExit status: 0 clean shutdown, 1 failure or second signal, 2 bad flags or configuration.\n")
}
