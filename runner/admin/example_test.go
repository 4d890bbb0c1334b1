package admin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// A program that embeds a worker serves the same admin routes as the stock
// runner: mount admin.New at the root of its HTTP server.
func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	h, err := admin.New(admin.Config{Client: client, Redis: rdb, Token: "example-token-0123456789"})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/v1/runs",
		strings.NewReader(`{"id": "hello", "nodes": [{"id": "greet", "kind": "noop"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer example-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// No runner is started here: the run is accepted, and says what it
	// waits for.
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	// Output: 201 {"id":"hello","status":"RUNNING","created":true,"warnings":["no runner serves kind noop on queue default"]}
}
