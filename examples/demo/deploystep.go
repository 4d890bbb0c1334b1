package main

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// deployStep is the demo's deploy node. It makes the same fenced call as
// the stock http kind (it wraps one), and then, on the node's first owner
// only, stops the world: that worker's Redis connection is cut (its
// heartbeats cannot get through) and the handler blocks, ignoring ctx as a
// GC pause or a stopped process would, until the demo lets it go. Then it
// returns its result as if nothing had happened.
type deployStep struct {
	call  runner.Kind // kinds.HTTP
	net   *partition  // this worker's link to Redis
	stage *stage
}

func (k *deployStep) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	resp, err := k.call.Run(ctx, t)
	if err != nil {
		return nil, err
	}
	if t.Lease.Epoch == 1 {
		k.net.cut()
		k.stage.freeze(t.Lease)
		<-k.stage.thawed // not ctx: a paused process cannot see its cancellation
	}
	return json.Marshal(struct {
		By       string          `json:"deployed_by"`
		Epoch    int64           `json:"epoch"`
		Response json.RawMessage `json:"response"`
	}{t.Lease.Owner, t.Lease.Epoch, resp})
}

// stage coordinates the pause between the frozen worker and the demo.
type stage struct {
	frozen chan fence.Lease // receives the victim's lease once it froze
	thawed chan struct{}    // closed to end the pause

	mu              sync.Mutex
	frozeAt, thawAt time.Time
	once            sync.Once
}

func newStage() *stage {
	return &stage{frozen: make(chan fence.Lease, 1), thawed: make(chan struct{})}
}

func (s *stage) freeze(l fence.Lease) {
	s.mu.Lock()
	if s.frozeAt.IsZero() {
		s.frozeAt = time.Now()
	}
	s.mu.Unlock()
	select {
	case s.frozen <- l:
	default: // only the first freeze is the demo's
	}
}

// thaw ends the pause; it is idempotent.
func (s *stage) thaw() {
	s.once.Do(func() {
		s.mu.Lock()
		s.thawAt = time.Now()
		s.mu.Unlock()
		close(s.thawed)
	})
}
