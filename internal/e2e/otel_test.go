package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/tracing"
	"github.com/batonrun/baton/tracing/otelsdk"
)

// span is one span as an OTLP/HTTP receiver got it.
type span struct {
	service              string
	traceID, id, parent  string
	name                 string
	attrs                map[string]string
	events               []spanEvent
	kind                 int32
	statusCode           int32
	startNano, endNano   uint64
	scope                string
	traceState           string
	droppedEventsOrAttrs uint32
	links                []spanLink
}

type spanLink struct {
	traceID, id string
	attrs       map[string]string
}

type spanEvent struct {
	name  string
	attrs map[string]string
}

// otlpReceiver is a real OTLP/HTTP endpoint (POST /v1/traces, protobuf),
// decoding what the processes under test export.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP traces export", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			t.Errorf("otlp receiver: undecodable export (%s): %v", req.Header.Get("Content-Type"), err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

func (r *otlpReceiver) add(msg *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{service: service, traceID: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(), attrs: attrMap(s.GetAttributes()),
					kind: int32(s.GetKind()), statusCode: int32(s.GetStatus().GetCode()), startNano: s.GetStartTimeUnixNano(),
					endNano: s.GetEndTimeUnixNano(), scope: ss.GetScope().GetName(), traceState: s.GetTraceState()}
				for _, l := range s.GetLinks() {
					sp.links = append(sp.links, spanLink{traceID: hex.EncodeToString(l.GetTraceId()), id: hex.EncodeToString(l.GetSpanId()), attrs: attrMap(l.GetAttributes())})
				}
				for _, e := range s.GetEvents() {
					sp.events = append(sp.events, spanEvent{name: e.GetName(), attrs: attrMap(e.GetAttributes())})
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

// find returns the spans that match.
func (r *otlpReceiver) find(match func(span) bool) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func (r *otlpReceiver) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.spans {
		fmt.Fprintf(&b, "%s %q trace=%s id=%s parent=%s attrs=%v events=%v\n", s.service, s.name, s.traceID, s.id, s.parent, s.attrs, s.events)
	}
	return b.String()
}

func (s span) event(name string) (spanEvent, bool) {
	for _, e := range s.events {
		if e.name == name {
			return e, true
		}
	}
	return spanEvent{}, false
}

// otelChildEnv, set in an exec node's env, makes the test binary act as
// an instrumented child process (TestMain): it joins TRACEPARENT with the
// OpenTelemetry SDK and exports a span of its own, as any traced tool an
// exec node runs would.
const otelChildEnv = "BATON_TEST_OTEL_CHILD"

func otelChild() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	stop := otelsdk.Setup(ctx, "exec-child", log)
	ctx, ok := tracing.Join(ctx, os.Getenv("TRACEPARENT"), os.Getenv("TRACESTATE"))
	if !ok || !tracing.Enabled() {
		fmt.Fprintf(os.Stderr, "child: no trace to join (TRACEPARENT=%q, tracing on: %v)\n", os.Getenv("TRACEPARENT"), tracing.Enabled())
		return 1
	}
	_, sp := tracing.Tracer().Start(ctx, "child work")
	sp.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: flush:", err)
		return 1
	}
	fmt.Printf("%q\n", os.Getenv("TRACEPARENT"))
	return 0
}

// A run of three nodes submitted by the enqueue CLI under a caller's
// traceparent is one trace across four processes: the submit span (a
// child of the caller's), a span per node attempt on the runners, the
// span an exec child makes from TRACEPARENT, and the http node's
// traceparent header at the downstream. The node whose runner is paused
// past its lease has two spans: the lost attempt's, with its
// heartbeat_lost and the stale write Redis refused, and the takeover's,
// with its epoch.
func TestTracesFollowARunAcrossProcessesAndATakeover(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	recv := newOTLPReceiver(t)
	otel := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "50", // ms: spans reach the receiver soon after they end
		"TRACE_URL":                   "https://traces.example/trace/{trace_id}?from=baton",
		"EXEC_ENV":                    "OTEL_*",    // the exec child exports its span too
		"EGRESS_ALLOW":                "127.0.0.1", // the http node's downstream runs here
	}
	var (
		mu          sync.Mutex
		traceparent []string
	)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparent = append(traceparent, r.Header.Get("traceparent"))
		mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer down.Close()

	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	self, err := os.Executable()
	require.NoError(t, err)
	child, _ := json.Marshal(map[string]any{"command": []string{self}, "env": map[string]string{otelChildEnv: "1"}})
	hit, _ := json.Marshal(map[string]any{"url": down.URL})
	// The second attempt of "slow" prints the TRACEPARENT it was given.
	slow := sh(fmt.Sprintf(`if [ -f %q ]; then printf '"%%s"' "$TRACEPARENT"; exit 0; fi; touch %q; sleep 300`, started, started))
	spec := fmt.Sprintf(`{"id":"traced","nodes":[
		{"id":"child","kind":"exec","input":%s},
		{"id":"call","kind":"http","input":%s},
		{"id":"slow","kind":"exec","deps":["child","call"],"input":%s}]}`, child, hit, slow)

	a := c.startRunner("ra", otel)
	callerTrace, callerSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	out, errOut := c.enqueueWith(append(envList(otel), "TRACEPARENT=00-"+callerTrace+"-"+callerSpan+"-01"), spec, "submit", "-")
	run := strings.TrimSpace(out)
	require.Equal(t, "traced", run, errOut)

	waitUntil(t, 30*time.Second, "the slow node to start on ra", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	a.signal(t, syscall.SIGSTOP) // paused past its lease: rb takes the node over
	b := c.startRunner("rb", otel)
	require.Equal(t, 0, c.watch(run))
	a.signal(t, syscall.SIGCONT)
	waitUntil(t, 20*time.Second, "the paused owner to give the node up", func() bool {
		return strings.Contains(a.log.String(), "attempt_abandoned")
	})

	// Everything in one trace: the caller's.
	var submit, slowLost, slowTaken span
	nodes := map[string]span{}
	waitUntil(t, 20*time.Second, "every span to be exported", func() bool {
		subs := recv.find(func(s span) bool { return s.name == "submit traced" })
		lost := recv.find(func(s span) bool { return s.attrs["baton.node.id"] == "slow" && s.attrs["baton.epoch"] == "1" })
		taken := recv.find(func(s span) bool { return s.attrs["baton.node.id"] == "slow" && s.attrs["baton.epoch"] == "2" })
		kids := recv.find(func(s span) bool { return s.name == "child work" })
		for _, n := range []string{"child", "call"} {
			if ss := recv.find(func(s span) bool { return s.attrs["baton.node.id"] == n && s.name == "node "+n }); len(ss) == 1 {
				nodes[n] = ss[0]
			}
		}
		if len(subs) != 1 || len(lost) != 1 || len(taken) != 1 || len(kids) != 1 || len(nodes) != 2 {
			return false
		}
		submit, slowLost, slowTaken = subs[0], lost[0], taken[0]
		nodes["child work"] = kids[0]
		return true
	})
	t.Logf("spans:\n%s", recv.dump())
	require.Equal(t, callerTrace, submit.traceID, "the submit joins the caller's trace")
	require.Equal(t, callerSpan, submit.parent, "the submit span is the caller's span's child")
	require.Equal(t, "baton-enqueue", submit.service)
	require.Equal(t, "traced", submit.attrs["baton.run.id"])

	for _, s := range []span{nodes["child"], nodes["call"], slowLost, slowTaken} {
		require.Equal(t, callerTrace, s.traceID, "%s is in the run's trace", s.name)
		require.Equal(t, submit.id, s.parent, "%s is a child of the submit span", s.name)
		require.Equal(t, run, s.attrs["baton.run.id"])
		require.Equal(t, "baton", s.attrs["messaging.system"])
		require.Equal(t, "process", s.attrs["messaging.operation.type"])
		require.Equal(t, "baton-runner", s.service)
		for _, k := range []string{"baton.attempt", "baton.epoch", "baton.worker.id", "baton.node.kind", "baton.outcome"} {
			require.NotEmpty(t, s.attrs[k], "%s has %s", s.name, k)
		}
	}
	require.Equal(t, "committed", nodes["child"].attrs["baton.outcome"])
	require.Equal(t, "http", nodes["call"].attrs["baton.node.kind"])
	require.Equal(t, "200", nodes["call"].attrs["http.response.status_code"])

	// The exec child's own span, made from TRACEPARENT by the SDK in
	// another process, is the child of its node's span.
	kid := nodes["child work"]
	require.Equal(t, "exec-child", kid.service)
	require.Equal(t, callerTrace, kid.traceID)
	require.Equal(t, nodes["child"].id, kid.parent)

	// The downstream got the http node's span as its parent.
	mu.Lock()
	require.Equal(t, []string{"00-" + callerTrace + "-" + nodes["call"].id + "-01"}, traceparent)
	mu.Unlock()

	// The takeover: the paused attempt on ra and its successor on rb, side
	// by side under the submit span, each with its epoch.
	require.Equal(t, "ra", slowLost.attrs["baton.worker.id"])
	require.Equal(t, "rb", slowTaken.attrs["baton.worker.id"])
	require.Equal(t, "committed", slowTaken.attrs["baton.outcome"])
	tk, ok := slowTaken.event("takeover")
	require.True(t, ok, "the successor's span has a takeover event: %v", slowTaken.events)
	require.Equal(t, "ra", tk.attrs["baton.prev_owner"])
	require.Equal(t, "2", tk.attrs["baton.epoch"])
	hl, ok := slowLost.event("heartbeat_lost")
	require.True(t, ok, "the paused attempt's span has heartbeat_lost: %v", slowLost.events)
	require.Equal(t, "1", hl.attrs["baton.epoch"])
	sr, ok := slowLost.event("stale_rejected")
	require.True(t, ok, "the paused attempt's span has the refused write: %v", slowLost.events)
	require.Equal(t, "1", sr.attrs["baton.epoch"])
	require.Equal(t, "stale_rejected", slowLost.attrs["baton.outcome"])
	require.Equal(t, int32(2), slowLost.statusCode, "the lost attempt's span is an error")
	// The two attempts link to each other: the lost one to its successor,
	// the successor to the attempt it took over from.
	require.Equal(t, []spanLink{{traceID: callerTrace, id: slowTaken.id, attrs: map[string]string{"baton.link": "superseded_by", "baton.epoch": "2"}}},
		slowLost.links, "the paused attempt's span links to its successor's")
	require.Equal(t, []spanLink{{traceID: callerTrace, id: slowLost.id, attrs: map[string]string{"baton.link": "took_over_from", "baton.epoch": "1"}}},
		slowTaken.links, "the successor's span links to the attempt it took over from")
	// Its second attempt was handed rb's span as TRACEPARENT.
	require.JSONEq(t, fmt.Sprintf("%q", "00-"+callerTrace+"-"+slowTaken.id+"-01"), string(c.status(run).node("slow").Result))

	// A run submitted over HTTP joins the trace of the request's
	// traceparent header; the submit span is the runner's.
	postTrace := "0af7651916cd43dd8448eb211c80319c"
	req, err := http.NewRequest(http.MethodPost, "http://"+b.admin+"/v1/runs",
		strings.NewReader(`{"id":"posted","nodes":[{"id":"n","kind":"noop"}]}`))
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+postTrace+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 0, c.watch("posted"))
	waitUntil(t, 20*time.Second, "the posted run's spans", func() bool {
		subs := recv.find(func(s span) bool { return s.name == "submit posted" })
		ns := recv.find(func(s span) bool { return s.attrs["baton.run.id"] == "posted" && s.name == "node n" })
		if len(subs) != 1 || len(ns) != 1 {
			return false
		}
		require.Equal(t, postTrace, subs[0].traceID)
		require.Equal(t, "b7ad6b7169203331", subs[0].parent)
		require.Equal(t, "baton-runner", subs[0].service)
		require.Equal(t, subs[0].id, ns[0].parent)
		return true
	})

	// The run view links to the run's trace (TRACE_URL).
	resp, err = http.Get("http://" + b.admin + "/runs/" + run)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `<a id="run-trace" href="https://traces.example/trace/`+callerTrace+`?from=baton"`)
}

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// enqueueWith runs the enqueue CLI with env added; it fails the test on a
// non-zero exit.
func (c *cluster) enqueueWith(env []string, stdin string, args ...string) (string, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "enqueue"), args...)
	cmd.Env = append(append(os.Environ(), c.env...), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(c.t, cmd.Run(), "enqueue %v: %s", args, errb.String())
	return out.String(), errb.String()
}

// Tracing that fails never fails a run: a collector that does not answer
// and a malformed traceparent are warnings, and the run succeeds.
func TestTracingBadInputRunsOn(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dead := fmt.Sprintf("http://127.0.0.1:%d", redistest.FreePort(t)) // nothing listens
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": dead, "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_EXPORTER_OTLP_TIMEOUT": "500"}
	a := c.startRunner("ra", env)
	begin := time.Now()
	out, errOut := c.enqueueWith(append(envList(env), "TRACEPARENT=not-a-traceparent"),
		`{"id":"untraceable","nodes":[{"id":"a","kind":"noop"},{"id":"b","kind":"noop","deps":["a"]}]}`, "submit", "-")
	require.Equal(t, "untraceable", strings.TrimSpace(out), errOut)
	require.Less(t, time.Since(begin), 10*time.Second, "the submit is not held up by the collector")
	require.Equal(t, 1, strings.Count(errOut, "traceparent_ignored"), errOut)
	require.Equal(t, 0, c.watch("untraceable"))
	require.Equal(t, "SUCCEEDED", c.status("untraceable").Status)
	// The runner says once that its spans go nowhere (at most once a minute).
	waitUntil(t, 20*time.Second, "the runner's export warning", func() bool {
		return strings.Contains(a.log.String(), "tracing_export_failed")
	})
	require.Equal(t, 1, strings.Count(a.log.String(), "tracing_export_failed"), a.log.String())
}

// A run submitted by a submitter that does not trace (no OTEL_* and no
// traceparent) is still one trace: the first runner to claim a node of it
// starts its root span, "run RUN", from the submit to that claim, and
// every attempt, on either runner, is a child of it.
func TestUntracedSubmitStillMakesOneTraceUnderARootSpan(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	recv := newOTLPReceiver(t)
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL, "OTEL_BSP_SCHEDULE_DELAY": "50"}
	c.startRunner("ra", otel)
	c.startRunner("rb", otel)
	begin := time.Now()
	out, errOut := c.enqueueWith([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "TRACEPARENT="},
		`{"id":"plain","nodes":[{"id":"a","kind":"noop"},{"id":"b","kind":"noop"},{"id":"c","kind":"noop","deps":["a","b"]}]}`, "submit", "-")
	require.Equal(t, "plain", strings.TrimSpace(out), errOut)
	require.Equal(t, 0, c.watch("plain"))

	var root span
	var nodes []span
	waitUntil(t, 20*time.Second, "the run's spans", func() bool {
		roots := recv.find(func(s span) bool { return s.name == "run plain" })
		nodes = recv.find(func(s span) bool { return s.attrs["baton.run.id"] == "plain" && strings.HasPrefix(s.name, "node ") })
		if len(roots) != 1 || len(nodes) != 3 {
			return false
		}
		root = roots[0]
		return true
	})
	t.Logf("spans:\n%s", recv.dump())
	require.Empty(t, recv.find(func(s span) bool { return s.name == "submit plain" }), "the submitter exported nothing")
	require.Equal(t, "", root.parent, "the run's span is the root of its trace")
	require.Equal(t, "baton-runner", root.service)
	require.Equal(t, "plain", root.attrs["baton.run.id"])
	require.Contains(t, []string{"ra", "rb"}, root.attrs["baton.worker.id"])
	// It starts at the submit (Redis's clock, ms) and ends at the first claim.
	require.InDelta(t, begin.UnixNano(), int64(root.startNano), float64(10*time.Second))
	require.LessOrEqual(t, root.startNano, root.endNano)
	for _, n := range nodes {
		require.Equal(t, root.traceID, n.traceID, "%s is in the run's trace", n.name)
		require.Equal(t, root.id, n.parent, "%s is a child of the run's span", n.name)
		require.Equal(t, "committed", n.attrs["baton.outcome"])
	}
	require.Equal(t, root.traceID, c.status("plain").TraceID, "the run view's trace is that trace")
}
