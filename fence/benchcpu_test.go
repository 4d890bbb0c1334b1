package fence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// redisScriptUsec is the CPU time Redis has spent in scripts (EVALSHA and
// EVAL), from INFO commandstats: what a node's protocol costs the server,
// whatever the load on the client's side.
func redisScriptUsec(b *testing.B, rdb redis.UniversalClient) float64 {
	usec, _ := redisScriptStats(b, rdb)
	return usec
}

// redisScriptStats is the CPU time Redis has spent in scripts and how many
// script calls it ran, from INFO commandstats.
func redisScriptStats(b *testing.B, rdb redis.UniversalClient) (usec, calls float64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.Index(line, ":")+1:]), ",") {
			name, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch name {
			case "usec":
				usec += n
			case "calls":
				calls += n
			}
		}
	}
	return usec, calls
}

// BenchmarkClaimCommitRedisCPU is BenchmarkClaimCommit reporting the
// Redis CPU its scripts cost per node (redis-µs/op), a figure the load on
// a shared machine disturbs far less than wall time.
func BenchmarkClaimCommitRedisCPU(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	s := fence.New(rdb, nil)
	ctx := context.Background()
	if err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	refs := benchSubmit(b, s, b.N)
	before := redisScriptUsec(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		c, err := s.Claim(ctx, refs[i], "bench", time.Minute, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit(ctx, c.Lease, []byte("{}"), c.Dependents); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((redisScriptUsec(b, rdb)-before)/float64(b.N), "redis-µs/op")
}
