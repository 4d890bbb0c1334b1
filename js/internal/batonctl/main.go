// Command batonctl is the JS tests' way into baton's Go side: it submits
// runs through runner.Client and claims their nodes through fence.Store,
// exactly as a runner does, so every lease a test's BatonSaver writes with
// is a live claim the real scripts know. It reads one JSON request per line
// on stdin and answers one JSON line on stdout:
//
//	{"op":"claim","prefix":"p","thread":"t","worker":"w","ttl_ms":600000}
//	    submit a one-node run on thread t (multitask enqueue) and claim its
//	    node; the thread must be idle
//	{"op":"takeover","prefix":"p","lease":{...},"worker":"w2","ttl_ms":...}
//	    claim the lease's node again once its lease has expired: epoch+1
//	{"op":"commit","prefix":"p","lease":{...}}
//	    commit the lease's node, ending its run
//	{"op":"heartbeat","prefix":"p","lease":{...},"ttl_ms":...}
//	    renew the lease, as the runner's heartbeater does
//	{"op":"cancel","prefix":"p","lease":{...}}
//	    cancel the lease's run, as enqueue cancel does
//
// Answers: {"lease":{...}} or {"error":"..."}. REDIS_URL names the Redis.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// node is the one node of every run batonctl submits.
const node = "graph"

type request struct {
	Op     string `json:"op"`
	Prefix string `json:"prefix"`
	Thread string `json:"thread"`
	Worker string `json:"worker"`
	TTLMS  int64  `json:"ttl_ms"`
	Lease  *lease `json:"lease"`
}

// lease is a fence.Lease as BatonSaver takes it.
type lease struct {
	Thread      string `json:"thread"`
	Run         string `json:"run"`
	Incarnation string `json:"incarnation"`
	Node        string `json:"node"`
	Attempt     int64  `json:"attempt"`
	Epoch       int64  `json:"epoch"`
	ClaimID     string `json:"claim"`
	Worker      string `json:"worker"`
	Token       string `json:"token"`
}

func fromFence(l fence.Lease) *lease {
	return &lease{Thread: l.Thread, Run: l.Run, Incarnation: l.Incarnation, Node: l.Node, Attempt: l.Attempt,
		Epoch: l.Epoch, ClaimID: l.ClaimID, Worker: l.Owner, Token: l.Token().String()}
}

func (l *lease) fence() fence.Lease {
	return fence.Lease{Thread: l.Thread, Run: l.Run, Incarnation: l.Incarnation, Node: l.Node, Attempt: l.Attempt,
		Epoch: l.Epoch, ClaimID: l.ClaimID, Owner: l.Worker}
}

type answer struct {
	Lease *lease `json:"lease,omitempty"`
	Error string `json:"error,omitempty"`
}

func main() {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	rdb, err := runner.OpenRedis(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "batonctl:", err)
		os.Exit(2)
	}
	defer rdb.Close()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a.Error = err.Error()
		} else if l, err := do(context.Background(), rdb, req); err != nil {
			a.Error = err.Error()
		} else {
			a.Lease = l
		}
		if err := out.Encode(a); err != nil {
			os.Exit(1)
		}
	}
}

func do(ctx context.Context, rdb redis.UniversalClient, req request) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store := fence.New(rdb, &fence.Options{Keys: fence.Keys{Prefix: req.Prefix}})
	ttl := time.Duration(max(req.TTLMS, 1)) * time.Millisecond
	switch req.Op {
	case "claim":
		client, err := runner.NewClient(runner.ClientConfig{Redis: rdb, Prefix: req.Prefix})
		if err != nil {
			return nil, err
		}
		defer client.Close()
		sub, err := client.Submit(ctx, &runner.RunSpec{Thread: req.Thread, Multitask: "enqueue",
			Nodes: []runner.NodeSpec{{ID: node, Kind: "noop", MaxAttempts: 100}}})
		if err != nil {
			return nil, err
		}
		if sub.Status != "RUNNING" {
			return nil, fmt.Errorf("run %s is %s behind %s: the thread is not idle", sub.RunID, sub.Status, sub.Behind)
		}
		c, err := store.Claim(ctx, fence.NodeRef{Thread: req.Thread, Run: sub.RunID, Node: node}, req.Worker, ttl, 0)
		if err != nil {
			return nil, err
		}
		return fromFence(c.Lease), nil
	case "takeover":
		if req.Lease == nil {
			return nil, errors.New("takeover: lease missing")
		}
		l := req.Lease.fence()
		for {
			c, err := store.Claim(ctx, fence.NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node}, req.Worker, ttl, 0)
			if errors.Is(err, fence.ErrNodeBusy) && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond) // the old lease runs out on Redis's clock
				continue
			}
			if err != nil {
				return nil, err
			}
			return fromFence(c.Lease), nil
		}
	case "heartbeat":
		if req.Lease == nil {
			return nil, errors.New("heartbeat: lease missing")
		}
		if _, err := store.Heartbeat(ctx, req.Lease.fence(), ttl, -1); err != nil {
			return nil, err
		}
		return req.Lease, nil
	case "cancel":
		if req.Lease == nil {
			return nil, errors.New("cancel: lease missing")
		}
		if _, err := store.Cancel(ctx, req.Lease.Run, "batonctl", "batonctl"); err != nil {
			return nil, err
		}
		return req.Lease, nil
	case "commit":
		if req.Lease == nil {
			return nil, errors.New("commit: lease missing")
		}
		if _, err := store.Commit(ctx, req.Lease.fence(), []byte(`null`), nil); err != nil {
			return nil, err
		}
		return req.Lease, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}
