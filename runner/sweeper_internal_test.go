package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// Runs that the sweep retains (every run) can end faster than one batch per busy wait: two runners' retention loops
// work off a backlog of many batches without waiting between them, and
// every run gets its time to live. The waits are an hour here, so a loop
// that waited once would fail the test.
func TestRetentionWorksOffABacklogAtOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	store := fence.New(rdb, nil)
	require.NoError(t, store.Load(ctx))
	const runs = 1500 // about 6 batches of 16 runs per shard
	node := []fence.NodeSpec{{ID: "a", Kind: "k", Queue: "default", Input: "null",
		Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
	for i := range runs {
		id := fmt.Sprintf("backlog-%d", i)
		_, err := store.Submit(ctx, fence.SubmitArgs{Run: id, Digest: "d", Nodes: node})
		require.NoError(t, err)
		c, err := store.Claim(ctx, fence.NodeRef{Thread: id, Run: id, Node: "a"}, "w", time.Minute, time.Second)
		require.NoError(t, err)
		_, err = store.Commit(ctx, c.Lease, []byte("{}"), nil)
		require.NoError(t, err)
	}

	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		s := &sweeper{store: store, retention: time.Hour, interval: time.Hour, busyEvery: time.Hour,
			log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: NewMetrics(nil)}
		wg.Add(1)
		go func() { defer wg.Done(); s.retainLoop(loopCtx) }()
	}
	defer func() { stop(); wg.Wait() }()

	keys := fence.Keys{}
	deadline := time.Now().Add(20 * time.Second)
	for left := int64(runs); left > 0; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "%d of %d runs still wait for retention", left, runs)
		left = 0
		for shard := range fence.Shards {
			n, err := rdb.ZCard(ctx, keys.Finished(shard)).Result()
			require.NoError(t, err)
			left += n
		}
	}
	for i := range runs {
		id := fmt.Sprintf("backlog-%d", i)
		// SUCCEEDED: packed into one key in place of its hashes and stream.
		ttl, err := rdb.PTTL(ctx, keys.Packed(id, id)).Result()
		require.NoError(t, err)
		require.True(t, ttl > 59*time.Minute && ttl <= time.Hour, "%s: time to live %s", id, ttl)
		gone, err := rdb.Exists(ctx, keys.Run(id, id), keys.Node(id, id, "a"), keys.Events(id, id)).Result()
		require.NoError(t, err)
		require.Zero(t, gone, id)
	}
}
