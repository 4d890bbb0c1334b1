package main

import (
	"context"
	"fmt"
	"strings"
)

// command is one subcommand: its usage line and what runs it.
type command struct {
	args  string // after the command's name, for usage lines
	short string // one line for the command list
	help  string
	flags string // one "  --flag  meaning" line per flag, for the command's usage
	run   func(a *app, ctx context.Context, args []string) error
}

// commands are the subcommands by name, with their help.
var commands = map[string]command{
	"submit": {args: "FILE|- [--require-served] [--traceparent TP]", run: (*app).submit,
		short: "submit a run spec; prints the run id",
		help: "Submit a run spec (JSON or YAML; - reads stdin) and print the run id.\n" +
			"Resubmitting the same spec under the same id prints the same id; another\n" +
			"spec under that id is refused (exit 1). Every problem of a bad spec is\n" +
			"printed on its own line, naming the field (exit 2).\n" +
			"A node whose kind no live runner serves is stored and waits for one, with\n" +
			"a warning; --require-served refuses the run instead, storing nothing\n" +
			"(exit 2, naming each such node and the nearest kind served).\n" +
			"--traceparent (default $TRACEPARENT) makes the run part of that trace;\n" +
			"OTEL_EXPORTER_OTLP_ENDPOINT exports the submit span."},
	"status": {args: "RUN [--json]", run: (*app).status,
		short: "show the run and its nodes",
		help: "Show the run and its nodes: state, attempts used/max_attempts (a released\n" +
			"attempt is not counted), epoch, owner, progress, result (cut to 40 characters)\n" +
			"and error.",
		flags: "  --json  print the run as one JSON object (nodes with id, state, attempt,\n          releases, epoch, owner, progress, result in full, error)\n"},
	"events": {args: "RUN [--json] [--follow] [--api URL] [--interval D]", run: (*app).events,
		short: "print the run's events (--follow: until it ends)",
		help: "Print the run's events as a timeline, oldest first: times in RFC 3339 with\n" +
			"milliseconds, lease_until and ready_at as times, *_ms details as durations.",
		flags: "  --json        one JSON object per line: id, type, node, epoch, worker,\n" +
			"                at (RFC 3339, UTC) and details (the type's other fields,\n" +
			"                strings as recorded)\n" +
			"  --follow      print events as they are appended until the run has ended and\n" +
			"                every event is printed (a blocking read of the run's stream)\n" +
			"  --api URL     with --follow, read the admin server's event stream (SSE) at URL\n" +
			"                instead of Redis (default $BATON_API_URL; token: $API_TOKEN)\n" +
			"  --interval D  with --follow, wait between retries after a failed read\n" +
			"                (default 200ms)\n"},
	"stream": {args: "RUN [--after ID] [--json]", run: (*app).stream,
		short: "print what the run's attempts stream, live until it ends", help: streamHelp, flags: streamFlags},
	"watch": {args: "RUN [--api URL] [--interval D]", run: (*app).watch,
		short: "live progress until the run ends; exit 0 only if it SUCCEEDED",
		help: "Show live progress until the run ends: a redrawn table on a terminal,\n" +
			"otherwise one line per change. It redraws when the run's events say something\n" +
			"changed. A run taller than the terminal shows its running, failed and ready\n" +
			"nodes first and counts the rest. Exit 0 if the run SUCCEEDED, 1 otherwise.",
		flags: "  --api URL     read through the admin server at URL instead of Redis\n" +
			"                (default $BATON_API_URL; token: $API_TOKEN)\n" +
			"  --interval D  redraw at most this often (default 250ms)\n"},
	"cancel": {args: "RUN [--reason TEXT]", run: (*app).cancel,
		short: "cancel the run; prints its resulting status",
		help: "Cancel the run and print its resulting status. Nodes not yet running\n" +
			"are cancelled at once; running ones are told at once and stop at a safe point.\n" +
			"Cancelling a cancelled run is fine; a finished run is refused (exit 1).",
		flags: "  --reason TEXT  recorded on the run and its events (default \"cancelled by user\")\n"},
	"retry": {args: "RUN [--id ID]", run: (*app).retry,
		short: "re-run a FAILED or CANCELLED run from its failed nodes; prints RUNNING",
		help: "Re-run a FAILED or CANCELLED run from its failed and cancelled nodes and print\n" +
			"its status (RUNNING). SUCCEEDED nodes keep their results and do not run again;\n" +
			"each re-run node gets its max_attempts again under a newer epoch, so a late\n" +
			"write from an earlier attempt is refused. A run already RUNNING is fine (exit 0,\n" +
			"nothing changes); a SUCCEEDED or QUEUED run, or a thread's run once the thread\n" +
			"has moved on to another run, is refused (exit 1).",
		flags: "  --id ID  names this request: the same id again is answered as the first time\n"},
	"resume": {args: "RUN NODE [--value JSON] [--wait ID]", run: (*app).resume,
		short: "answer a parked (WAITING) node; prints the answer",
		help: "Answer the wait of a parked node (WAITING: it asked a person or waits for an\n" +
			"event) with a JSON value: the node is READY again and its next attempt reads\n" +
			"the value. Prints the wait's answer as JSON ({\"value\": ...}). A second resume\n" +
			"of the same wait changes nothing and prints the first answer (exit 0); a node\n" +
			"that is not waiting, or a run cancelled or finished, is refused (exit 1);\n" +
			"a value that is not JSON is bad input (exit 2).",
		flags: "  --value JSON  the answer (default null)\n" +
			"  --wait ID     the wait answered (default: the one the node waits on now)\n"},
	"list": {args: "[--status S] [--thread T] [--limit N] [--json]", run: (*app).list,
		short: "list runs, newest first",
		help:  "List runs, newest first.",
		flags: "  --status S  only runs in status S: PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED\n" +
			"  --thread T  only the runs of thread T (a run without a thread is the thread of its id)\n" +
			"  --limit N   at most N runs (default 50)\n" +
			"  --json      print a JSON array of {id, thread, status, nodes, done}\n"},
	"delete": {args: "RUN", run: (*app).del,
		short: "delete an ended run at once; prints deleted RUN (STATUS)",
		help: "Delete a run that has ended (SUCCEEDED, FAILED or CANCELLED) at once: its\n" +
			"nodes, events and listing entry go in one step; its thread's checkpoints stay.\n" +
			"A QUEUED or RUNNING run is refused (exit 1): cancel it first."},
	"pause": {args: "QUEUE", run: (*app).pause,
		short: "pause a queue: no runner starts a node of it until unpause",
		help: "Pause a queue, as the Asynq web UI's pause does (either undoes the other):\n" +
			"Asynq delivers none of its tasks and no runner continues a chain onto it\n" +
			"(runners read the pause within 250 ms); a node already running goes on.\n" +
			"Its READY nodes say \"waiting: queue Q is paused\" in status and the run view."},
	"unpause": {args: "QUEUE", run: (*app).unpause,
		short: "resume a paused queue",
		help: "Resume a queue paused by enqueue pause or the Asynq web UI: its nodes start\n" +
			"again. (resume answers a parked node; a queue is unpaused.)"},
	"workers": {args: "[--json]", run: (*app).workers,
		short: "list the live runners with the kinds and queues they serve",
		help: "List the live runners: each advertises its kinds and queues in Redis,\n" +
			"refreshed by its sweeper, and drops out of the list when it stops or dies.",
		flags: "  --json  print a JSON array of {id, kinds, queues, concurrency, started_at, seen_at}\n"},
	"checkpoint": {args: "THREAD [--ns NS] [--json] [--all]", run: (*app).checkpoint,
		short: "print the thread's newest checkpoint (--all: its history)", help: checkpointHelp, flags: checkpointFlags},
	"thread": {args: "THREAD [--json]", run: (*app).thread,
		short: "show the thread's active run, queued runs and checkpoint namespaces",
		help:  "Show the thread: its active run, the runs queued behind it, and the newest\ncheckpoint version of each namespace. An unknown thread is exit 1.",
		flags: "  --json  print {thread, active, active_status, queued, checkpoints: {ns: version}}\n"},
	"schedule": {args: "add|list|rm ...", run: (*app).schedule,
		short: "cron schedules: add NAME --cron EXPR SPEC-FILE, list, rm NAME",
		help:  scheduleHelp, flags: scheduleFlags},
}

// commandOrder is the order usage lists the commands in.
var commandOrder = []string{"submit", "status", "events", "stream", "watch", "cancel", "retry", "resume", "delete", "list", "thread", "checkpoint", "workers", "pause", "unpause", "schedule"}

// usage is the top-level help: commands, environment and exit statuses.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: enqueue COMMAND [ARGS]\n\nSubmit, inspect, watch, cancel and retry baton runs.\n\nCommands:\n")
	for _, name := range commandOrder {
		c := commands[name]
		fmt.Fprintf(&b, "  %-6s %s\n         %s\n", name, c.args, c.short)
	}
	b.WriteString(`  help [COMMAND]
         this text, or a command's
  --version
         this build's version

Environment:
  REDIS_URL        redis://[user:password@]host:port/db, rediss:// for TLS
                   (default redis://127.0.0.1:6379/0)
  REDIS_CLUSTER_ADDRS  a Redis Cluster instead: host:port,host:port,...
  REDIS_SENTINEL_ADDRS, REDIS_SENTINEL_MASTER, REDIS_SENTINEL_PASSWORD
                   Sentinel instead: the sentinels, the primary's name, their password
  REDIS_USERNAME, REDIS_PASSWORD, REDIS_TLS
                   the data nodes' credentials and TLS, in cluster and sentinel modes
  REDIS_TLS_CA_FILE  PEM file of the CAs to trust, in every mode with TLS
  BATON_PREFIX     key prefix shared with the workers (default baton)
  MAX_INPUT_BYTES  largest node input submit accepts (default 1048576)
  MAX_SPEC_BYTES   largest whole spec submit accepts (default 8388608)
  BATON_LOG_LEVEL  diagnostics on stderr: debug, info, warn, error (default warn)
  BATON_API_URL    admin server that events --follow and watch read through
                   (default: none, they read Redis)
  API_TOKEN        bearer token for BATON_API_URL / --api
  TRACEPARENT, TRACESTATE  the caller's span: submit's run joins its trace
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_*  export submit's span over OTLP/HTTP

Exit status: 0 ok; 1 refused or failed (run, thread or checkpoint not found,
conflict, run already finished, Redis unreachable, watched run did not
succeed, interrupted); 2 bad input (usage, spec, run or thread id, checkpoint
namespace, environment).
`)
	return b.String()
}

// commandUsage is one command's help.
func commandUsage(name string, c command) string {
	s := fmt.Sprintf("usage: enqueue %s %s\n\n%s\n", name, c.args, c.help)
	if c.flags != "" {
		s += "\nFlags:\n" + c.flags
	}
	return s
}
