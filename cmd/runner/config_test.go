package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(map[string]string{}, false)
	require.NoError(t, err)
	assert.Equal(t, Config{
		Concurrency:     10,
		Queues:          "default=1",
		LeaseTTL:        30 * time.Second,
		Grace:           time.Second,
		SweepInterval:   time.Second,
		ShutdownTimeout: 10 * time.Second,
		AdminAddr:       "127.0.0.1:8080",
		AgentAPIAddr:    "127.0.0.1:2024",
		LogLevel:        "info",
		LogFormat:       "text",
		MaxInputBytes:   1 << 20,
		MaxSpecBytes:    8 << 20,
		Prefix:          "baton",
		TakeFromQueue:   true,
		Retention:       7 * 24 * time.Hour,
		ThreadRetention: 30 * 24 * time.Hour,

		CheckpointHistory:  100,
		MaxCheckpointBytes: 1 << 20,
		ReadyThreshold:     15 * time.Second,

		ScheduleInterval: time.Second,
		ScheduleLate:     time.Minute,
		LangGraphPython:  "python3",
		LangGraphNode:    "node",
		Jobs:             JobsConfig{Kinds: "exec,http,sleep,noop"},

		EventStreamsPerClient: 8,
		EventStreamMaxAge:     10 * time.Minute,

		adminAddrDefault:    true,
		agentAPIAddrDefault: true,
	}, cfg)
	assert.Equal(t, 10*time.Second, cfg.heartbeat(), "HEARTBEAT_INTERVAL defaults to LEASE_TTL/3")
}

// An operator fixing a config sees every problem in one go, each naming
// its variable.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(map[string]string{
		"REDIS_URL":          "http://127.0.0.1:6379",
		"RUNNER_ID":          "a b",
		"CONCURRENCY":        "0",
		"DISPATCHERS":        "17",
		"POLL_INTERVAL":      "500us",
		"QUEUES":             "critical=0,b{ad=1",
		"LEASE_TTL":          "3s",
		"HEARTBEAT_INTERVAL": "2s",
		"GRACE":              "0s",
		"SWEEP_INTERVAL":     "-1s",
		"SCHEDULE_INTERVAL":  "0s",
		"SHUTDOWN_TIMEOUT":   "0",
		"ADMIN_ADDR":         "0.0.0.0:8080",
		"LOG_LEVEL":          "loud",
		"LOG_FORMAT":         "xml",
		"MAX_INPUT_BYTES":    "0",
		"BATON_PREFIX":       "a{b",
		"TRACE_URL":          "traces.example/{trace_id}",
	}, false)
	require.Error(t, err)
	msg := err.Error()
	bad := []string{"REDIS_URL", "RUNNER_ID", "CONCURRENCY", "DISPATCHERS", "POLL_INTERVAL", "QUEUES",
		"LEASE_TTL", "GRACE", "SWEEP_INTERVAL", "SHUTDOWN_TIMEOUT", "ADMIN_ADDR", "LOG_LEVEL", "LOG_FORMAT",
		"MAX_INPUT_BYTES", "BATON_PREFIX", "TRACE_URL", "SCHEDULE_INTERVAL"}
	for _, key := range bad {
		assert.Contains(t, msg, key)
	}
	assert.Contains(t, msg, "critical", "each bad queue is named")
	assert.Contains(t, msg, "b{ad")
	assert.Contains(t, msg, "API_TOKEN")
	assert.Len(t, strings.Split(msg, "\n"), len(bad), "one line per bad variable:\n%s", msg)
}

// A value that does not parse is reported once, with its variable and
// value, and does not drag in follow-on complaints.
func TestUnparsableValues(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(map[string]string{"LEASE_TTL": "thirty", "CONCURRENCY": "ten", "HEARTBEAT_INTERVAL": "5"}, false)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 3, "%s", err)
	assert.Contains(t, err.Error(), `LEASE_TTL "thirty"`)
	assert.Contains(t, err.Error(), `CONCURRENCY "ten"`)
	assert.Contains(t, err.Error(), `HEARTBEAT_INTERVAL "5"`)
	assert.Contains(t, err.Error(), "missing unit", "the reason is kept")
}

func TestLeaseVsHeartbeat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ttl, hb string
		ok      bool
	}{
		{"30s", "", true},
		{"30s", "10s", true},
		{"30s", "10001ms", false},
		{"3s", "2s", false},
		{"1s", "0", true},
		{"50ms", "", false}, // below the 100ms floor
		{"30s", "-1s", false},
	}
	for _, tc := range cases {
		env := map[string]string{"LEASE_TTL": tc.ttl}
		if tc.hb != "" {
			env["HEARTBEAT_INTERVAL"] = tc.hb
		}
		_, err := loadConfig(env, false)
		if tc.ok {
			assert.NoError(t, err, "LEASE_TTL=%s HEARTBEAT_INTERVAL=%s", tc.ttl, tc.hb)
			continue
		}
		if assert.Error(t, err, "LEASE_TTL=%s HEARTBEAT_INTERVAL=%s", tc.ttl, tc.hb) {
			assert.Contains(t, err.Error(), "LEASE_TTL")
		}
	}
	_, err := loadConfig(map[string]string{"LEASE_TTL": "3s", "HEARTBEAT_INTERVAL": "2s"}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LEASE_TTL 3s must be at least 3 × HEARTBEAT_INTERVAL 2s")
}

func TestPollInterval(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]time.Duration{"": 0, "0": 0, "1ms": time.Millisecond, "25ms": 25 * time.Millisecond, "10s": 10 * time.Second} {
		env := map[string]string{}
		if value != "" {
			env["POLL_INTERVAL"] = value
		}
		cfg, err := loadConfig(env, false)
		if assert.NoError(t, err, "POLL_INTERVAL=%q", value) {
			assert.Equal(t, want, cfg.PollInterval, "POLL_INTERVAL=%q", value)
		}
	}
	for _, value := range []string{"500us", "11s", "-10ms", "10"} {
		_, err := loadConfig(map[string]string{"POLL_INTERVAL": value}, false)
		if assert.Error(t, err, "POLL_INTERVAL=%q", value) {
			assert.Contains(t, err.Error(), "POLL_INTERVAL", "the variable is named")
		}
	}
}

func TestAdminAddr(t *testing.T) {
	t.Parallel()
	const token = strongToken
	cases := []struct {
		addr, token string
		ok          bool
		says        string
	}{
		{"127.0.0.1:8080", "", true, ""},
		{"127.0.0.2:0", "", true, ""},
		{"localhost:8080", "", true, ""},
		{"[::1]:9000", "", true, ""},
		{"0.0.0.0:8080", "", false, "API_TOKEN"},
		{":8080", "", false, "API_TOKEN"},
		{"10.0.0.5:8080", "", false, "API_TOKEN"},
		{"runner.internal:8080", "", false, "API_TOKEN"},
		{"0.0.0.0:8080", token, true, ""},
		{":8080", token, true, ""},
		{"0.0.0.0:8080", "short", false, "at least 16"},
		{"0.0.0.0:8080", "has a space in it!!", false, "whitespace"},
		{"8080", "", false, "host:port"},
		{"127.0.0.1:99999", "", false, "host:port"},
		{"127.0.0.1:http", "", false, "host:port"},
	}
	for _, tc := range cases {
		env := map[string]string{"ADMIN_ADDR": tc.addr}
		if tc.token != "" {
			env["API_TOKEN"] = tc.token
		}
		_, err := loadConfig(env, false)
		if tc.ok {
			assert.NoError(t, err, "ADMIN_ADDR=%s", tc.addr)
			continue
		}
		if assert.Error(t, err, "ADMIN_ADDR=%s API_TOKEN=%q", tc.addr, tc.token) {
			assert.Contains(t, err.Error(), tc.says)
		}
	}

	cfg, err := loadConfig(map[string]string{"ADMIN_ADDR": ""}, false)
	require.NoError(t, err)
	assert.Empty(t, cfg.AdminAddr, "ADMIN_ADDR set but empty disables the admin server")
}

func TestQueues(t *testing.T) {
	t.Parallel()
	q, err := parseQueues(" critical=6, default=3,low=1,")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"critical": 6, "default": 3, "low": 1}, q)

	for in, says := range map[string]string{
		"":                  "no queue",
		"default":           "name=weight",
		"default=0":         "weight",
		"default=x":         "weight",
		"a=1,a=2":           "twice",
		"a:b=1":             "invalid id",
		"default=1,low=-1x": "queue low",
	} {
		_, err := parseQueues(in)
		if assert.Error(t, err, "%q", in) {
			assert.Contains(t, err.Error(), says, "%q", in)
		}
	}
}

func TestEmbeddedIgnoresRedisURL(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(map[string]string{"REDIS_URL": "not a url"}, false)
	assert.ErrorContains(t, err, "REDIS_URL")
	_, err = loadConfig(map[string]string{"REDIS_URL": "not a url"}, true)
	assert.NoError(t, err)
}

// One deployment at a time: setting two or three of the modes names them
// all, and each mode's own problems are named too.
func TestRedisModes(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(map[string]string{"REDIS_URL": "redis://a:6379/0", "REDIS_CLUSTER_ADDRS": "a:7000,b:7001",
		"REDIS_SENTINEL_ADDRS": "s:26379", "REDIS_SENTINEL_MASTER": "m"}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "REDIS_URL, REDIS_CLUSTER_ADDRS, REDIS_SENTINEL_ADDRS are all set")

	for env, says := range map[string]string{
		"REDIS_CLUSTER_ADDRS=a:7000,b":          `REDIS_CLUSTER_ADDRS: "b" is not host:port`,
		"REDIS_SENTINEL_ADDRS=s:26379":          "REDIS_SENTINEL_MASTER is empty",
		"REDIS_SENTINEL_MASTER=m":               "REDIS_SENTINEL_ADDRS is empty",
		"REDIS_PASSWORD=x":                      "with one server put it in REDIS_URL",
		"REDIS_URL=redis://h:1/0?addr=h:2":      "REDIS_CLUSTER_ADDRS",
		"REDIS_TLS_CA_FILE=/nonexistent/ca.pem": "REDIS_TLS_CA_FILE",
		"REDIS_CLUSTER_ADDRS=a:7000,b:0":        `"b:0" has no valid port`,
		"REDIS_SENTINEL_PASSWORD=x":             "REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINEL_ADDRS is empty",
		"REDIS_URL=rediss://:pw@h:6380/0":       "",
		"REDIS_CLUSTER_ADDRS= a:7000 , b:7001 ": "",
		"REDIS_SENTINEL_ADDRS=s:1,t:2":          "REDIS_SENTINEL_MASTER",
	} {
		k, v, _ := strings.Cut(env, "=")
		environ := map[string]string{k: v}
		if k == "REDIS_CLUSTER_ADDRS" || k == "REDIS_SENTINEL_ADDRS" {
			environ["REDIS_PASSWORD"] = "secret-pw" // allowed in these modes, never echoed
		}
		_, err := loadConfig(environ, false)
		if says == "" {
			assert.NoError(t, err, env)
			continue
		}
		if assert.Error(t, err, env) {
			assert.Contains(t, err.Error(), says, env)
			assert.NotContains(t, err.Error(), "secret-pw", env)
		}
	}
}

// `runner -h` documents every variable the runner reads.
func TestUsageListsEveryVariable(t *testing.T) {
	t.Parallel()
	keys := envKeys()
	// A few that must be there, so that envKeys cannot come back empty;
	// the variables' count is not fixed here, so a new one needs no edit.
	for _, key := range []string{"REDIS_URL", "LEASE_TTL", "ADMIN_ADDR", "API_TOKEN", "MAX_SPEC_BYTES"} {
		require.True(t, slices.Contains(slices.Collect(maps.Values(keys)), key), key)
	}
	for _, key := range keys {
		assert.Contains(t, envHelp, "\n  "+key+" ")
	}
}

// The spec cap (MAX_SPEC_BYTES) must hold a spec with one input at the
// input cap: a smaller one is refused at start, naming both.
func TestSpecCapHoldsAnInput(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(map[string]string{"MAX_INPUT_BYTES": "2000000", "MAX_SPEC_BYTES": "1000000"}, false)
	require.ErrorContains(t, err, "MAX_SPEC_BYTES")
	require.ErrorContains(t, err, "is below MAX_INPUT_BYTES 2000000")
	c, err := loadConfig(map[string]string{}, false)
	require.NoError(t, err)
	require.Equal(t, 8<<20, c.MaxSpecBytes)
}

// The thread's checkpoint settings are the runner's, within their limits:
// each bad one is named with what it accepts.
func TestCheckpointSettings(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(map[string]string{"THREAD_RETENTION": "-1s", "CHECKPOINT_HISTORY": "5",
		"MAX_CHECKPOINT_BYTES": "4096"}, false)
	require.NoError(t, err)
	require.Equal(t, -time.Second, c.ThreadRetention)
	require.Equal(t, 5, c.CheckpointHistory)
	require.Equal(t, 4096, c.MaxCheckpointBytes)
	_, err = loadConfig(map[string]string{"THREAD_RETENTION": "30s", "CHECKPOINT_HISTORY": "0",
		"MAX_CHECKPOINT_BYTES": "100"}, false)
	require.Error(t, err)
	for _, want := range []string{"THREAD_RETENTION 30s: want at least 1m", "CHECKPOINT_HISTORY 0: want 1 to 10000",
		"MAX_CHECKPOINT_BYTES 100: want 1024 to 67108864"} {
		require.ErrorContains(t, err, want)
	}
}
