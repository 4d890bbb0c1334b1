package agentapitest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// A known difference between baton and LangGraph's reference server, as the
// official clients see it. Each is copied, with its reason, to
// docs/agent-server.md's "Differences" section (TestDifferencesAreDocumented).
type knownDifference struct {
	// Path matches the difference's path (step, then the JSON path).
	Path *regexp.Regexp
	// Graphs is "js" or "python" when only that project shows it, else "".
	Graphs string
	// Reason says why, in the docs' words.
	Reason string
}

// differences is the one list of what the test accepts.
var differences = []knownDifference{
	{Path: regexp.MustCompile(`^cron\b`),
		Reason: "Crons: the reference server answers every cron route with an error (its crons are not implemented); baton schedules them."},
	{Path: regexp.MustCompile(`^(cancel\.(status|thread_status)|multitask_(interrupt|rollback)\.first)$`),
		Reason: "A cancelled run (cancel, or the run a `multitask_strategy: interrupt` run replaces) is `interrupted`, and its thread `idle`, as LangGraph's Python server records them; the JS reference marks both `error`, its worker taking the abort for a failure."},
	{Path: regexp.MustCompile(`^multitask_reject\.second\.error$`),
		Reason: "`multitask_strategy: reject` on a busy thread answers 409 Conflict, as LangGraph's Python server does; the JS reference answers 422."},
	{Path: regexp.MustCompile(`^multitask_rollback\.(second_join|state)\.delay_ms$`),
		Reason: "`multitask_strategy: rollback` deletes the replaced run's checkpoints, its input's included, so the next run starts from the thread as it was; the JS reference keeps them (its rollback stops the run as `error`)."},
	{Path: regexp.MustCompile(`^interrupt\.state\.interrupts$`),
		Reason: "A thread's state lists its pending `interrupts` at the top, as LangGraph's Python server's `ThreadState` does; the JS reference lists them only under each task."},
	{Path: regexp.MustCompile(`^(wait_join\.created|multitask_\w+\.second)\.status$`),
		Reason: "`runs.create` answers the run as it stands, `running` when a worker has taken it already (baton starts a run within milliseconds); the JS reference, whose queue polls about once a second, answers `pending`."},
	{Path: regexp.MustCompile(`^thread_create\.(created|got)\.(values|interrupts)$`),
		Reason: "A new thread carries `values` (null) and `interrupts` ({}), fields of the SDKs' `Thread` type; the JS reference adds them once a run has ended."},
	{Path: regexp.MustCompile(`^stream\[\d+\]\[1\]\[1\]\.langgraph_version$`),
		Reason: "Token chunks' metadata carries the `langgraph_version` the graph runs with; the JS reference, as the test starts it, says `0.0.0`."},
	{Path: regexp.MustCompile(`^stream\[\d+\]\[1\].*\.(id|name|type|usage_metadata|chunk_position|tool_call_chunks|lc_versions|ls_provider|tags|versions)$`), Graphs: "python",
		Reason: "Python graphs' messages are LangChain Python's (ids `lc_run--…`, `name` and `usage_metadata` null, token chunks typed `AIMessageChunk`, metadata naming Python's packages); the reference server runs JS graphs only, so the test compares them with JS LangChain's."},
	{Path: regexp.MustCompile(`^stream\[\d+\]\[1\]\[1\]\.baton_run$`),
		Reason: "Token chunks' metadata (the run's `config.metadata`) carries `baton_run`, the run id baton's saver marks each checkpoint with, so that an attempt knows a checkpoint of its own run from an earlier run's."},
	{Path: regexp.MustCompile(`^(wait_join\.(created|run)\.kwargs\.(temporary|resumable))$`),
		Reason: "A run's `kwargs` leave out `temporary` and `resumable`: baton keeps every run's stream (a stateless run's `on_completion` is its own field), so neither changes what a client can do."},
	{Path: regexp.MustCompile(`^interrupt(_before)?\.first\.(topic|steps|__interrupt__)$`),
		Reason: "`runs.wait` on a run stopped at `interrupt()` or a breakpoint answers the state's values with `__interrupt__` beside them, as LangGraph's Python server does; the JS reference answers `__interrupt__` alone."},
	{Path: regexp.MustCompile(`^stream\[\d+\](\[\d+\])?$`), Graphs: "js",
		Reason: "In a JS graph a token chunk (`messages`) written by the model's last callback can come after a `custom` chunk the node writes as soon as the model returns; the JS reference streams both from one event stream, in the order they happened. Python graphs keep the order."},
}

func known(d difference, graphs string) *knownDifference {
	for i := range differences {
		k := &differences[i]
		if (k.Graphs == "" || k.Graphs == graphs) && k.Path.MatchString(d.path) {
			return k
		}
	}
	return nil
}

// Every known difference is in docs/agent-server.md, with its reason.
func TestDifferencesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/agent-server.md")
	if err != nil {
		t.Fatalf("docs/agent-server.md: %v", err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	for _, k := range differences {
		if !strings.Contains(doc, strings.Join(strings.Fields(k.Reason), " ")) {
			t.Errorf("docs/agent-server.md's differences do not say: %q", k.Reason)
		}
	}
}
