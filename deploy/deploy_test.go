// Package deploy_test checks the files that ship under deploy/: the
// Prometheus rules parse, and every series the rules and the Grafana
// dashboard query is one a live runner exports.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/batonrun/baton/internal/bintest"
	"github.com/batonrun/baton/internal/redistest"
)

var binDir string

func TestMain(m *testing.M) {
	bintest.Main(m, func(dir string) { binDir = dir }, "github.com/batonrun/baton/cmd/runner")
}

const (
	rulesFile     = "prometheus/baton-rules.yaml"
	dashboardFile = "grafana/baton.json"
)

// prometheusMade are series Prometheus itself records for every target.
var prometheusMade = map[string]bool{"up": true}

type rule struct {
	Alert, Record, Expr string
	Annotations         map[string]string
}

func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &f), rulesFile)
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	require.NotEmpty(t, out, "%s has no rules", rulesFile)
	return out
}

// dashboardExprs returns the dashboard's queries (panels and template
// variables), with Grafana's variables replaced by values Prometheus
// accepts, so that they parse as PromQL.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &d), dashboardFile)
	r := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*")
	var out []string
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q has an empty query", p.Title)
			out = append(out, r.Replace(tg.Expr))
		}
	}
	return out
}

// promtool returns promtool's path, skipping the test when it is missing
// (unless BATON_REQUIRE_PROMTOOL is set, as in CI, which installs
// Debian's prometheus package).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("BATON_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is not installed (apt-get install prometheus) and BATON_REQUIRE_PROMTOOL is set")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return p
}

// The shipped rules pass promtool, and so do the dashboard's queries,
// checked as recording rules.
func TestRulesAndDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	pt := promtool(t)
	out, err := exec.Command(pt, "check", "rules", rulesFile).CombinedOutput()
	require.NoError(t, err, "promtool check rules %s:\n%s", rulesFile, out)

	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(f, []byte(b.String()), 0o644))
	out, err = exec.Command(pt, "check", "rules", f).CombinedOutput()
	require.NoError(t, err, "the dashboard's queries do not parse:\n%s\n%s", out, b.String())
}

// Every alert has a runbook paragraph in docs/observability.md, under a
// heading of its name, and says where it is.
func TestEveryAlertHasARunbook(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/observability.md")
	require.NoError(t, err)
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		require.Contains(t, string(doc), "\n### "+r.Alert+"\n", "no runbook heading for %s", r.Alert)
		require.Equal(t, "docs/observability.md#"+strings.ToLower(r.Alert), r.Annotations["runbook"], "%s's runbook annotation", r.Alert)
	}
}

// Every series the rules and the dashboard read is exported by a live
// runner on its first scrape, before it has run anything: an alert on a
// name no runner exports would never fire.
func TestQueriesUseOnlyExportedSeries(t *testing.T) {
	t.Parallel()
	exported := scrape(t)
	require.Contains(t, exported, "baton_nodes_running", "the scrape lost its way")
	require.Contains(t, exported, "baton_limit_in_use", "the runner did not set its LIMITS_FILE")

	check := func(where, expr string) {
		names := metricNames(expr)
		require.NotEmpty(t, names, "%s: no metric found in %q", where, expr)
		for _, n := range names {
			if !exported[n] && !prometheusMade[n] {
				t.Errorf("%s reads %s, which a runner does not export (query %q)", where, n, expr)
			}
		}
	}
	for _, r := range readRules(t) {
		check("rule "+r.Alert+r.Record, r.Expr)
	}
	for _, e := range dashboardExprs(t) {
		check("dashboard", e)
	}
}

// scrapedLimits are the limits the scraped runner sets at start
// (LIMITS_FILE): one with a concurrency and a rate, and a prefix rule, so
// that every baton_limit_* series the dashboard reads is on the scrape, as
// it is on any fleet that sets limits.
const scrapedLimits = `{"limits": [
	{"name": "openai", "concurrency": 3, "rate": "20/s", "burst": 5},
	{"name": "tenant:*", "concurrency": 1}
]}`

// scrape starts a runner on a redis-server of its own and returns the
// names of the series on its /metrics.
func scrape(t *testing.T) map[string]bool {
	t.Helper()
	r := redistest.Start(t)
	admin := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	limits := filepath.Join(t.TempDir(), "limits.json")
	require.NoError(t, os.WriteFile(limits, []byte(scrapedLimits), 0o644))
	cmd := exec.Command(filepath.Join(binDir, "runner"))
	cmd.Env = append(os.Environ(), "REDIS_URL="+r.URL(), "ADMIN_ADDR="+admin, "RUNNER_ID=scraped", "LIMITS_FILE="+limits)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("runner exited at start:\n%s", log.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the runner's /metrics did not answer: %v", err)
		time.Sleep(50 * time.Millisecond) // polling a process's start
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[line[:strings.IndexAny(line, "{ ")]] = true
	}
	return names
}

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	braces    = regexp.MustCompile(`\{[^}]*\}`)
	brackets  = regexp.MustCompile(`\[[^\]]*\]`)
	labelList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// promqlWords are PromQL's functions, aggregators and keywords: an
// identifier that is none of them is a metric name.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`abs absent absent_over_time avg avg_over_time bool bottomk ceil changes
		clamp clamp_max clamp_min count count_over_time count_values day_of_month day_of_week delta deriv
		exp floor group histogram_quantile holt_winters idelta increase inf irate label_join label_replace
		last_over_time ln log10 log2 max max_over_time min min_over_time nan offset or and unless
		predict_linear quantile quantile_over_time rate resets round scalar sgn sort sort_desc sqrt stddev
		stddev_over_time stdvar sum sum_over_time time timestamp topk vector year month hour minute
		by without on ignoring group_left group_right`) {
		promqlWords[w] = true
	}
}

// metricNames returns the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = braces.ReplaceAllString(e, "{}")
	e = brackets.ReplaceAllString(e, "[]")
	e = labelList.ReplaceAllString(e, "")
	seen := map[string]bool{}
	for _, loc := range ident.FindAllStringIndex(e, -1) {
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.") {
			continue // the unit of a number or a duration: 5m, 1e3
		}
		w := e[loc[0]:loc[1]]
		if promqlWords[strings.ToLower(w)] {
			continue
		}
		seen[w] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// The name extraction itself: what it finds in the shapes the files use.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`sum by (instance, le) (rate(baton_heartbeat_rtt_seconds_bucket{le="10",instance=~"a|b"}[5m])) > 1e3`: {"baton_heartbeat_rtt_seconds_bucket"},
		`absent(baton_nodes_running)`: {"baton_nodes_running"},
		`up{job="baton"} == 0`:        {"up"},
		`sum(increase(baton_takeovers_total[10m])) / ignoring(op) sum(baton_x offset 5m)`: {"baton_takeovers_total", "baton_x"},
	} {
		require.Equal(t, want, metricNames(expr), expr)
	}
}
