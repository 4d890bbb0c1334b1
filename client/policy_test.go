package client_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/jobpolicy"
	"github.com/batonrun/baton/spec"
)

// advertise lists a live runner serving kinds on queues with rules, as a
// runner's advertisement does.
func advertise(t *testing.T, rdb redis.UniversalClient, id string, kinds, queues []string, rules *jobpolicy.Rules) {
	t.Helper()
	w := fence.WorkerInfo{ID: id, Kinds: kinds, Queues: queues, StartedAt: time.Now(), SeenAt: time.Now()}
	if rules != nil {
		b, err := json.Marshal(rules)
		require.NoError(t, err)
		w.Jobs = b
	}
	require.NoError(t, fence.New(rdb, nil).Advertise(t.Context(), w, time.Minute))
}

// policyRun breaks each rule a stock runner publishes: a $file outside
// EXEC_FILE_DIRS, an $env outside EXEC_ENV_REFS, an http URL and a
// webhook into refused ranges, and a kind every runner switched off.
func policyRun(id string) *spec.Run {
	return &spec.Run{ID: id, Notify: &spec.Notify{URL: "http://169.254.169.254/latest"}, Nodes: []spec.Node{
		{ID: "cmd", Kind: "exec", Queue: "cmds", Input: json.RawMessage(`{"command": ["true"],
			"env": {"A": {"$file": "/etc/shadow"}, "B": {"$env": "API_TOKEN"}, "C": {"$file": "/run/secrets/ok"}, "D": {"$env": "OK_KEY"}}}`)},
		{ID: "call", Kind: "http", Input: json.RawMessage(`{"url": "http://127.0.0.1:8080/monitor/api/queues/default:pause"}`)},
		{ID: "off", Kind: "exec"},
		{ID: "fine", Kind: "http", Input: json.RawMessage(`{"url": "http://10.20.0.7/hook"}`)}}}
}

// wantPolicyProblems checks err names each broken rule's field and setting.
func wantPolicyProblems(t *testing.T, err error, prefix string) {
	t.Helper()
	require.ErrorIs(t, err, spec.ErrInvalid)
	fields := map[string]string{}
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined), "%v", err)
	for _, e := range joined.Unwrap() {
		var se *spec.Error
		require.ErrorAs(t, e, &se)
		fields[se.Field] = se.Msg
	}
	require.Contains(t, fields[prefix+"nodes[0].input.env.A"], "EXEC_FILE_DIRS", "%v", err)
	require.Contains(t, fields[prefix+"nodes[0].input.env.B"], "EXEC_ENV_REFS", "%v", err)
	require.Contains(t, fields[prefix+"nodes[1].input.url"], "EGRESS_ALLOW", "%v", err)
	require.Contains(t, fields[prefix+"nodes[2].kind"], "switched off on every live runner of queue default (KINDS)", "%v", err)
	require.Contains(t, fields[prefix+"notify.url"], "EGRESS_ALLOW", "%v", err)
	require.Len(t, fields, 5, "what the rules allow is not refused: %v", err)
}

// policyFleet is a runner of exec on queue cmds that reads /run/secrets
// and OK_*, and a runner of http, sleep and noop (exec switched off) on
// the default queue that may reach 10.20.0.0/16.
func policyFleet(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	allow, err := egress.Parse("EGRESS_ALLOW", "10.20.0.0/16")
	require.NoError(t, err)
	advertise(t, rdb, "cmds-1", []string{"exec"}, []string{"cmds"},
		&jobpolicy.Rules{Kinds: []string{"exec"}, EnvRefs: []string{"OK_*"}, FileDirs: []string{"/run/secrets"}, Egress: allow})
	advertise(t, rdb, "web-1", []string{"http", "noop", "sleep"}, []string{"default"},
		&jobpolicy.Rules{Kinds: []string{"http", "sleep", "noop"}, Egress: allow})
}

// The Go client refuses at submit what the live runners would refuse when
// the run's nodes run, every problem at once, naming the field and the
// setting, and stores nothing: the policy is the one the runners
// published, not the submitter's environment.
func TestSubmitRefusesWhatTheLiveRunnersRefuse(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	policyFleet(t, rdb)

	_, err = c.Submit(t.Context(), policyRun("refused"))
	wantPolicyProblems(t, err, "")
	_, err = c.Status(t.Context(), "refused")
	require.ErrorIs(t, err, fence.ErrNotFound, "nothing stored")

	// What the rules allow is stored.
	ok := policyRun("allowed")
	ok.Notify = nil
	ok.Nodes = []spec.Node{ok.Nodes[3], {ID: "cmd", Kind: "exec", Queue: "cmds",
		Input: json.RawMessage(`{"command": ["true"], "env": {"C": {"$file": "/run/secrets/ok"}}}`)}}
	out, err := c.Submit(t.Context(), ok)
	require.NoError(t, err)
	require.True(t, out.Created)
}

// With no live runner that published its rules nothing is known, and a
// run is stored (it is checked when it runs).
func TestSubmitWithoutPublishedRulesStores(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	advertise(t, rdb, "go-program", []string{"exec", "http"}, []string{"default", "cmds"}, nil)
	_, err = c.Submit(t.Context(), policyRun("unknown"))
	require.NoError(t, err)
}

// PutSchedule refuses a schedule whose run the live runners would refuse,
// naming each field, and stores nothing. One stored before its runners
// published their rules is refused at each tick, which says why.
func TestPutScheduleRefusesWhatTheLiveRunnersRefuse(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	now := time.Date(2026, 12, 4, 10, 0, 0, 500e6, time.UTC)
	m.SetTime(now)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	run := policyRun("")
	sched := &spec.Schedule{Name: "nightly", Cron: "* * * * *", Run: run}

	// Stored while no runner is live.
	_, _, err = c.PutSchedule(t.Context(), &spec.Schedule{Name: "early", Cron: "* * * * *", Run: run})
	require.NoError(t, err)

	policyFleet(t, rdb)
	later, err := client.New(client.Config{Redis: rdb}) // a runner's scheduler: a listing of its own
	require.NoError(t, err)
	_, _, err = later.PutSchedule(t.Context(), sched)
	wantPolicyProblems(t, err, "")
	_, err = later.Schedule(t.Context(), "nightly")
	require.ErrorIs(t, err, fence.ErrNotFound, "nothing stored")

	// The early one's tick is refused, saying why.
	m.SetTime(now.Add(time.Minute))
	fired, err := later.FireDue(t.Context(), time.Hour)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	require.Equal(t, client.FiredProblem, fired[0].Outcome)
	require.Contains(t, fired[0].Problem, "nodes[0].input.env.A")
	require.Contains(t, fired[0].Problem, "EXEC_FILE_DIRS")
	st, err := later.Schedule(t.Context(), "early")
	require.NoError(t, err)
	require.Contains(t, st.Error, "EXEC_ENV_REFS")
}
