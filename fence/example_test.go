package fence_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
)

// A worker claims a node, does its work and commits the result under the
// lease it was given. A commit carrying an older lease would be refused.
func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	store := fence.New(rdb, nil)

	sub, err := store.Submit(ctx, fence.SubmitArgs{Run: "hello", Digest: "v1", Nodes: []fence.NodeSpec{{
		ID: "greet", Kind: "noop", Queue: "default", Input: `{"name":"world"}`,
		Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3,
	}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("ready:", sub.Ready)

	c, err := store.Claim(ctx, fence.NodeRef{Thread: sub.Thread, Run: "hello", Node: "greet"},
		"worker-1", 30*time.Second, 5*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed:", c.Lease, "attempt", c.Attempt, "input", string(c.Input))

	done, err := store.Commit(ctx, c.Lease, []byte(`"hello, world"`), c.Dependents)
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", done.RunStatus)

	run, err := store.GetRun(ctx, "hello")
	if err != nil {
		panic(err)
	}
	n := run.Nodes[0]
	fmt.Println(n.ID, n.State, "epoch", n.Epoch, "result", string(n.Result))
	// Output:
	// ready: [greet]
	// claimed: hello/greet@1 attempt 1 input {"name":"world"}
	// run: SUCCEEDED
	// greet SUCCEEDED epoch 1 result "hello, world"
}
