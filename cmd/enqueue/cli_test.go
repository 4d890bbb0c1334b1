package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	env := testEnv("REDIS_URL=redis://127.0.0.1:1/0") // nothing here needs Redis
	for _, tc := range []struct {
		args []string
		code int
		want string // on stderr for 2, stdout for 0
	}{
		{nil, 2, "usage: enqueue COMMAND"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"--json"}, 2, `unknown command "--json"`},
		{[]string{"status"}, 2, "missing RUN"},
		{[]string{"status", "a", "b"}, 2, `unexpected argument "b"`},
		{[]string{"events", "r", "--follow=maybe"}, 2, "usage: enqueue events"},
		{[]string{"cancel", "r", "--reason"}, 2, "flag needs an argument"},
		{[]string{"cancel", "r", "--reason", strings.Repeat("x", 2000)}, 2, "at most 1024"},
		{[]string{"help"}, 0, "REDIS_URL"},
		{[]string{"help", "watch"}, 0, "usage: enqueue watch RUN"},
		{[]string{"submit", "-h"}, 0, "usage: enqueue submit"},
		{[]string{"--version"}, 0, "enqueue "},
		{[]string{"help"}, 0, "  workers"},
		{[]string{"help"}, 0, "  resume"},
	} {
		r := enqueue(t, env, "", tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		if tc.code == 0 {
			require.Contains(t, r.stdout, tc.want, tc.args)
		} else {
			require.Contains(t, r.stderr, tc.want, tc.args)
			require.Empty(t, r.stdout, tc.args)
		}
	}
}

func TestBadEnvironmentExits2(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{
		{"MAX_INPUT_BYTES=lots"},
		{"MAX_INPUT_BYTES=-1"},
		{"BATON_PREFIX=a{b}"},
		{"REDIS_URL=http://:secret@localhost:6379/0"},
		{"REDIS_URL=redis://:secret@[::1"},
	} {
		r := enqueue(t, testEnv(env...), "", "status", "r")
		require.Equal(t, 2, r.code, "%v: %s", env, r.stderr)
		require.Contains(t, r.stderr, strings.Split(env[0], "=")[0])
		require.NotContains(t, r.stderr, "secret")
	}
}

func TestRedisUnreachableExits1WithoutThePassword(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	env := testEnv("REDIS_URL=redis://:secret@" + addr + "/0")
	for _, args := range [][]string{{"status", "r"}, {"submit", "-"}, {"watch", "r"}, {"events", "r", "--follow"}, {"list"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := enqueue(t, env, `{"nodes": [{"id": "a", "kind": "noop"}]}`, args...)
			require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
			require.Less(t, time.Since(start), 10*time.Second)
			require.Contains(t, r.stderr, "redis://:xxxxx@"+addr+"/0 unreachable")
			require.NotContains(t, r.stderr+r.stdout, "secret")
			require.Empty(t, r.stdout)
		})
	}
}

func TestPrefixSeparatesDeployments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, `{"id": "p-1", "nodes": [{"id": "a", "kind": "noop"}]}`)

	other := append(append([]string{}, b.env...), "BATON_PREFIX=staging")
	r := enqueue(t, other, "", "status", id)
	require.Equal(t, 1, r.code, "another prefix does not see the run")
	require.Contains(t, r.stderr, "BATON_PREFIX staging")
}
