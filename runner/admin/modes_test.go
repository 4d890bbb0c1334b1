package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// TestEveryRedisMode: the run API and the Asynq web UI work on a Redis
// Cluster and through Sentinel, with passwords, as on one server: a run
// submitted over HTTP is listed and readable, and the UI's API shows its
// queue with the node pending.
func TestEveryRedisMode(t *testing.T) {
	t.Parallel()
	modes := map[string]func(t *testing.T) runner.RedisConfig{
		"cluster": func(t *testing.T) runner.RedisConfig {
			c := redistest.StartCluster(t, redistest.ClusterOptions{Masters: 3, Password: "cluster-secret-1"})
			return runner.RedisConfig{ClusterAddrs: c.Addrs(), Password: c.Password()}
		},
		"sentinel": func(t *testing.T) runner.RedisConfig {
			s := redistest.StartSentinel(t, redistest.SentinelOptions{Password: "data-secret-1", SentinelPassword: "sentinel-secret-1"})
			return runner.RedisConfig{SentinelAddrs: s.SentinelAddrs(), SentinelMaster: s.MasterName,
				SentinelPassword: s.SentinelPassword(), Password: s.Password()}
		},
	}
	for name, start := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb, err := start(t).Open()
			require.NoError(t, err)
			t.Cleanup(func() { _ = rdb.Close() })
			client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
			require.NoError(t, err)
			t.Cleanup(func() { _ = client.Close() })
			h, err := admin.New(admin.Config{Client: client, Redis: rdb})
			require.NoError(t, err)
			srv := httptest.NewServer(contract(t, h))
			t.Cleanup(srv.Close)

			get := func(path string, into any) {
				t.Helper()
				resp, err := http.Get(srv.URL + path)
				require.NoError(t, err)
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, raw)
				require.NoError(t, json.Unmarshal(raw, into), "%s: %s", path, raw)
			}
			ids := map[string]bool{}
			for _, thread := range []string{"t-one", "t-two", "t-three", "t-four"} {
				resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(
					`{"thread": "`+thread+`", "nodes": [{"id": "a", "kind": "noop", "queue": "critical"}]}`))
				require.NoError(t, err)
				var sub struct {
					ID string `json:"id"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&sub))
				resp.Body.Close()
				require.Equal(t, http.StatusCreated, resp.StatusCode)
				ids[sub.ID] = true
				var run struct {
					Status string `json:"status"`
				}
				get("/v1/runs/"+sub.ID, &run)
				require.Equal(t, "RUNNING", run.Status, "stored; its node waits for a runner")
			}
			var list struct {
				Runs []struct {
					ID string `json:"id"`
				} `json:"runs"`
			}
			get("/v1/runs", &list)
			for _, r := range list.Runs {
				delete(ids, r.ID)
			}
			require.Empty(t, ids, "every run is listed, whatever its shard")

			var queues struct {
				Queues []struct {
					Queue   string `json:"queue"`
					Pending int    `json:"pending"`
				} `json:"queues"`
			}
			get("/monitor/api/queues", &queues)

			// A runner's advertisement and its withdrawal work in every
			// mode (their keys are in different slots of a cluster).
			store := client.Store()
			require.NoError(t, store.Advertise(t.Context(), fence.WorkerInfo{ID: "w-" + name, Kinds: []string{"noop"},
				Queues: []string{"critical"}}, time.Minute))
			require.NoError(t, store.Withdraw(t.Context(), "w-"+name))
			require.Len(t, queues.Queues, 1)
			require.Equal(t, "critical", queues.Queues[0].Queue)
			require.Equal(t, 4, queues.Queues[0].Pending)
		})
	}
}
