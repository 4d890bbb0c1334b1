package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownRedis is a redis-server the bench started for itself (-own-redis): no
// persistence, nobody else's commands in its commandstats or its memory.
type ownRedis struct {
	cmd *exec.Cmd
	dir string
	url string
}

func startOwnRedis(ctx context.Context) (*ownRedis, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "baton-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("own redis: %w (is redis-server installed?)", err)
	}
	r := &ownRedis{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	opt, _ := redis.ParseURL(r.url)
	c := redis.NewClient(opt)
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := c.Ping(ctx).Err(); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("own redis on port %d: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the server the bench started (by its own pid) and removes its
// directory.
func (r *ownRedis) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = os.RemoveAll(r.dir)
}
