package runner

import (
	"fmt"
	"sync"

	"github.com/hibiken/asynq"
)

// dispatchers are the Asynq servers of one worker. An Asynq server has one
// dequeue loop, one blocking round trip per task: at a few thousand tasks
// a second that round trip, not CPU, is its ceiling (see the README's
// Performance). Several servers in one process dequeue in parallel; they
// share the worker's handlers, heartbeater and concurrency.
type dispatchers []*asynq.Server

// split divides concurrency among n servers, the first ones taking one
// more where it does not divide evenly; never more servers than slots.
func split(concurrency, n int) []int {
	n = max(1, min(n, concurrency))
	out := make([]int, n)
	for i := range out {
		out[i] = concurrency / n
		if i < concurrency%n {
			out[i]++
		}
	}
	return out
}

// start starts every server with h; if one fails, those started are shut
// down again.
func (d dispatchers) start(h asynq.Handler) error {
	for i, s := range d {
		if err := s.Start(h); err != nil {
			d[:i].shutdown()
			return fmt.Errorf("dispatcher %d of %d: %w", i+1, len(d), err)
		}
	}
	return nil
}

// stop makes every server stop fetching, at once: no server keeps
// dequeueing while another is being stopped.
func (d dispatchers) stop() { d.each((*asynq.Server).Stop) }

// shutdown shuts every server down, in parallel (each waits up to its
// ShutdownTimeout for its handlers and requeues what is unfinished).
func (d dispatchers) shutdown() { d.each((*asynq.Server).Shutdown) }

func (d dispatchers) each(f func(*asynq.Server)) {
	var wg sync.WaitGroup
	for _, s := range d {
		wg.Add(1)
		go func() { defer wg.Done(); f(s) }()
	}
	wg.Wait()
}
