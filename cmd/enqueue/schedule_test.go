package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const oneNoop = `{"nodes": [{"id": "a", "kind": "noop"}]}`

// TestScheduleAddListRm: a schedule is added from a spec file and flags,
// listed with its next tick, added again unchanged, and removed; removing
// it again is refused.
func TestScheduleAddListRm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := filepath.Join(t.TempDir(), "sync.yaml")
	require.NoError(t, os.WriteFile(path, []byte("nodes:\n  - id: a\n    kind: noop\n"), 0o600))

	r := b.run(t, "", "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris",
		"--missed", "latest", "--thread", "nightly", "--multitask", "reject", path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^nightly next \d{4}-\d\d-\d\dT0[12]:00:00Z\n$`, r.stdout, "03:00 in Paris is 01:00 or 02:00 UTC")

	again := b.run(t, "", "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris",
		"--missed", "latest", "--thread", "nightly", "--multitask", "reject", path)
	require.Equal(t, 0, again.code, again.stderr)
	require.Equal(t, r.stdout, again.stdout, "the same schedule again changes nothing")

	r = b.run(t, "", "schedule", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "NAME")
	require.Regexp(t, `(?m)^nightly\s+0 3 \* \* \*\s+Europe/Paris\s+\S+Z\s+-\s+-\s+-$`, r.stdout)

	r = b.run(t, "", "schedule", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []struct {
		Name, Cron, TZ, Missed, Thread, Multitask string
		Next                                      string
		Run                                       struct{ Nodes []struct{ ID, Kind string } }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 1)
	require.Equal(t, "latest", list[0].Missed)
	require.Equal(t, "reject", list[0].Multitask)
	require.Equal(t, "noop", list[0].Run.Nodes[0].Kind)
	require.NotEmpty(t, list[0].Next)

	r = b.run(t, "", "schedule", "rm", "nightly")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deleted schedule nightly\n", r.stdout)
	r = b.run(t, "", "schedule", "rm", "nightly")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "schedule nightly not found")
	r = b.run(t, "", "schedule", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "only the header: %q", r.stdout)
}

// TestScheduleBadInputExits2NamingTheField: each bad flag, name or spec
// is named on stderr, exit 2, and nothing is stored.
func TestScheduleBadInputExits2NamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"add", "x", "--cron", "*/5 * * *", "-"}, oneNoop, "cron: "},
		{[]string{"add", "x", "--cron", "61 * * * *", "-"}, oneNoop, "cron: "},
		{[]string{"add", "x", "--cron", "* * * * *", "--tz", "Mars/Olympus", "-"}, oneNoop, "tz: "},
		{[]string{"add", "x", "--cron", "0 0 30 2 *", "-"}, oneNoop, `cron: "0 0 30 2 *" never fires`},
		{[]string{"add", "x", "--cron", "0 3 * * *", "--tz", "Europe/Pariss", "-"}, oneNoop, `tz: "Europe/Pariss" is not a known IANA time zone`},
		{[]string{"add", "a:b", "--cron", "* * * * *", "-"}, oneNoop, "name: "},
		{[]string{"add", "x", "--cron", "* * * * *", "--missed", "all", "-"}, oneNoop, "missed: "},
		{[]string{"add", "x", "--cron", "* * * * *", "--thread", "t", "--multitask", "often", "-"}, oneNoop, "multitask: "},
		{[]string{"add", "x", "--cron", "* * * * *", "-"}, `{"nodes": [{"id": "a"}]}`, "kind"},
		{[]string{"add", "x", "--cron", "* * * * *", "-"}, `{"id": "r1", "nodes": [{"id": "a", "kind": "noop"}]}`, "run.id: "},
		{[]string{"add", "x", "-"}, oneNoop, "missing --cron"},
		{[]string{"add", "x", "--cron", "* * * * *"}, oneNoop, "want NAME and SPEC-FILE"},
		{[]string{"rm", "a b"}, "", "schedule name"},
		{[]string{"frob"}, "", `unknown schedule command "frob"`},
	} {
		r := b.run(t, tc.stdin, append([]string{"schedule"}, tc.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.args)
		require.Empty(t, r.stdout, tc.args)
	}
	n, err := b.srv.Client(t).DBSize(t.Context()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing stored")
}

// TestScheduleBadAddKeepsTheStoredSchedule: a cron that never fires or
// a zone that does not exist, given for a stored schedule, exits 2
// naming the field, and the stored schedule is listed as before.
func TestScheduleBadAddKeepsTheStoredSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, oneNoop, "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris", "-")
	require.Equal(t, 0, r.code, r.stderr)
	before := b.run(t, "", "schedule", "list", "--json")
	require.Equal(t, 0, before.code, before.stderr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cron", "0 0 30 2 *"}, `cron: "0 0 30 2 *" never fires`},
		{[]string{"--cron", "0 3 * * *", "--tz", "Europe/Pariss"}, `tz: "Europe/Pariss" is not a known IANA time zone`},
	} {
		args := append(append([]string{"schedule", "add", "nightly"}, tc.args...), "-")
		r := b.run(t, oneNoop, args...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want)
	}
	after := b.run(t, "", "schedule", "list", "--json")
	require.Equal(t, before.stdout, after.stdout, "the stored schedule is unchanged")
}
