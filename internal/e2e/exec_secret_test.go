package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redisDump is every key of the Redis and its content, as text.
func redisDump(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var v any
		var err error
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		case "none":
			continue // gone meanwhile
		default:
			t.Fatalf("key %s: type %s not read", k, typ)
		}
		require.NoError(t, err, k)
		out[k] = fmt.Sprint(v)
	}
	require.NoError(t, iter.Err())
	return out
}

// An exec node's env may reference the runner's own environment
// ({"$env": "NAME"}): the command runs with the value, and the value is
// nowhere in Redis (every key read), the CLI's status and events, the
// HTTP API's run and events, or the run view's pages.
func TestExecEnvSecretIsNeverStored(t *testing.T) {
	t.Parallel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	secret := "sk-" + hex.EncodeToString(b)
	c := newCluster(t)
	r := c.startRunner("secret-r1", map[string]string{"BATON_E2E_API_KEY": secret, "EXEC_ENV_REFS": "BATON_E2E_API_KEY"})
	run := c.submit(`{"id":"secret-run","nodes":[{"id":"agent","kind":"exec","input":{
		"command":["sh","-c","case \"$OPENAI_API_KEY\" in sk-*) echo \"{\\\"key_length\\\": ${#OPENAI_API_KEY}}\";; *) exit 1;; esac"],
		"env":{"OPENAI_API_KEY":{"$env":"BATON_E2E_API_KEY"}}}}]}`)
	require.Equal(t, 0, c.watch(run))
	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	require.JSONEq(t, fmt.Sprintf(`{"key_length": %d}`, len(secret)), string(st.node("agent").Result), "the command ran with the value")

	// The retention may pack the finished run into one key while a dump
	// scans, and the scan can then miss both shapes: dump until one holds
	// the reference, and no dump may hold the secret.
	rdb := c.redis.Client(t)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		var reference bool
		for k, v := range redisDump(t, rdb) {
			require.NotContains(t, v, secret, "Redis key %s", k)
			require.NotContains(t, k, secret)
			reference = reference || strings.Contains(v, `BATON_E2E_API_KEY`)
		}
		if reference {
			break
		}
		require.Less(t, time.Since(start), 10*time.Second, "the stored input holds the reference")
	}
	status, _, _ := c.enqueue("", "status", run, "--json")
	events, _, _ := c.enqueue("", "events", run, "--json")
	require.NotContains(t, status+events, secret)
	for _, path := range []string{"/v1/runs/" + run, "/v1/runs/" + run + "/events", "/runs/" + run, "/runs/" + run + "/nodes/agent"} {
		resp, err := http.Get("http://" + r.admin + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		require.NotContains(t, string(body), secret, path)
		if strings.HasPrefix(path, "/v1/runs/"+run) && !strings.HasSuffix(path, "events") {
			var v map[string]any
			require.NoError(t, json.Unmarshal(body, &v), path)
		}
	}
}
