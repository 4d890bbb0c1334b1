package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/admin"
)

// Schedules stored, read, listed and deleted through the HTTP API; bad
// ones answer 400 naming the field and change nothing. Responses are
// checked against openapi.json by the test server.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	const run = `"run": {"nodes": [{"id": "a", "kind": "noop"}]}`
	var st struct {
		Name, Cron, TZ, Thread, Multitask, Next string
	}
	b.call(t, "PUT", "/v1/schedules/nightly", `{"cron": "0 3 * * *", "tz": "Europe/Paris", "thread": "nightly", "multitask": "reject", `+run+`}`,
		http.StatusOK, &st)
	require.Equal(t, "nightly", st.Name)
	require.Equal(t, "Europe/Paris", st.TZ)
	require.NotEmpty(t, st.Next)
	b.call(t, "PUT", "/v1/schedules/sync", `{"cron": "*/5 * * * *", `+run+`}`, http.StatusOK, nil)

	var list admin.SchedulesBody
	b.call(t, "GET", "/v1/schedules", "", http.StatusOK, &list)
	require.Len(t, list.Schedules, 2)
	require.Equal(t, "nightly", list.Schedules[0].Name)
	require.Equal(t, "sync", list.Schedules[1].Name)

	for _, bad := range []struct{ path, body, want string }{
		{"/v1/schedules/nightly", `{"cron": "*/5 * * *", ` + run + `}`, "cron: "},
		{"/v1/schedules/nightly", `{"cron": "* * * * *", "tz": "Mars/Olympus", ` + run + `}`, "tz: "},
		{"/v1/schedules/nightly", `{"cron": "0 0 30 2 *", ` + run + `}`, `{"field":"cron","message":"\"0 0 30 2 *\" never fires: no time matches it`},
		{"/v1/schedules/nightly", `{"cron": "0 3 * * *", "tz": "Europe/Pariss", ` + run + `}`, `{"field":"tz","message":"\"Europe/Pariss\" is not a known IANA time zone`},
		{"/v1/schedules/nightly", `{"cron": "* * * * *", "missed": "all", ` + run + `}`, "missed: "},
		{"/v1/schedules/nightly", `{"cron": "* * * * *", "run": {"nodes": [{"id": "a"}]}}`, "kind"},
		{"/v1/schedules/nightly", `{"cron": "* * * * *"}`, "'run'"},
		{"/v1/schedules/nightly", `{"cron": "* * * * *", "colour": "red", ` + run + `}`, "colour"},
		{"/v1/schedules/a%7Bb%7D", `{"cron": "* * * * *", ` + run + `}`, "name"},
	} {
		resp, raw := send(t, b.request(t, "PUT", bad.path, bad.body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", bad.body, raw)
		require.Contains(t, string(raw), bad.want)
	}
	b.call(t, "GET", "/v1/schedules/nightly", "", http.StatusOK, &st)
	require.Equal(t, "0 3 * * *", st.Cron, "a refused PUT changed nothing")
	require.Equal(t, "reject", st.Multitask)
	require.Equal(t, "Europe/Paris", st.TZ)

	b.call(t, "DELETE", "/v1/schedules/nightly", "", http.StatusOK, nil)
	b.call(t, "DELETE", "/v1/schedules/nightly", "", http.StatusNotFound, nil)
	b.call(t, "GET", "/v1/schedules/nightly", "", http.StatusNotFound, nil)
}
