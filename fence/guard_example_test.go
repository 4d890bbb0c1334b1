package fence_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
)

// A payment service admits the token of each request before it charges.
// Worker 1 (epoch 1) pauses; baton hands the node to worker 2 (epoch 2);
// worker 2 charges and may retry; worker 1 resumes and is refused.
func ExampleGuard() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	guard := fence.NewGuard(rdb, nil)

	w1 := fence.Token{Run: "order-7", Node: "charge", Epoch: 1, ClaimID: "c1"}
	w2 := fence.Token{Run: "order-7", Node: "charge", Epoch: 2, ClaimID: "c2"}
	for _, tok := range []fence.Token{w1, w2, w2, w1} {
		switch err := guard.Admit(ctx, tok); {
		case err == nil:
			fmt.Println(tok, "admitted: charge")
		case fence.IsFenced(err):
			fmt.Println(tok, "refused:", err)
		default:
			panic(err) // the guard could not decide: do not charge
		}
	}
	// Output:
	// order-7/charge@1/c1 admitted: charge
	// order-7/charge@2/c2 admitted: charge
	// order-7/charge@2/c2 admitted: charge
	// order-7/charge@1/c1 refused: guard order-7/charge@1/c1: seen epoch 2: fence: stale epoch
}

// The same service over HTTP: the runner's http node kind sends the token in
// the Baton-Fencing-Token header, and the middleware answers 409 to a stale
// owner before the handler runs.
func ExampleGuardHTTP() {
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.TokenFrom(r.Context())
		fmt.Fprintf(w, "charged under epoch %d", tok.Epoch)
	})
	srv := httptest.NewServer(fence.GuardHTTP(fence.NewMemoryGuard(), charge, nil))
	defer srv.Close()

	for _, tok := range []string{"order-7/charge@2/c2", "order-7/charge@1/c1", ""} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/charge", nil)
		if err != nil {
			panic(err)
		}
		if tok != "" {
			req.Header.Set(fence.HeaderFencingToken, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// 200 charged under epoch 2
	// 409 {"error":"guard order-7/charge@1/c1: seen epoch 2: fence: stale epoch"}
	// 400 {"error":"fence: missing Baton-Fencing-Token header"}
}
