package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/jobpolicy"
	"github.com/batonrun/baton/spec"
)

// checkPolicy refuses what the live runners would refuse of run when its
// nodes run (jobpolicy.Check): a stock kind they all switched off, an
// http or webhook URL into a range they refuse, an $env or $file they do
// not let jobs read. Each runner publishes its rules in its
// advertisement, so a submit from anywhere (a laptop's enqueue, the API
// of a runner that serves other queues, a schedule's tick) checks against
// the fleet's settings, not its own environment. The listing is the one
// Submit's warnings read, at most a second old.
func (c *Client) checkPolicy(ctx context.Context, run *spec.Run) error {
	live, err := c.liveWorkers(ctx)
	if err != nil {
		return fmt.Errorf("reading the live runners' job policies: %w", err)
	}
	return jobpolicy.Check(policyView(live), run)
}

// policyView is the live runners as jobpolicy sees them. Rules a runner
// published that do not read (a newer runner's) count as none published.
func policyView(live []fence.WorkerInfo) []jobpolicy.Runner {
	out := make([]jobpolicy.Runner, len(live))
	for i, w := range live {
		out[i] = jobpolicy.Runner{ID: w.ID, Kinds: w.Kinds, Queues: w.Queues}
		if len(w.Jobs) > 0 {
			var r jobpolicy.Rules
			if json.Unmarshal(w.Jobs, &r) == nil {
				out[i].Rules = &r
			}
		}
	}
	return out
}

// liveWorkers returns the live runners as read at most liveFor ago: a
// burst of submits reads the listing once a second, not per run.
func (c *Client) liveWorkers(ctx context.Context) ([]fence.WorkerInfo, error) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if c.live == nil || time.Since(c.liveAt) > liveFor {
		live, err := c.store.Workers(ctx)
		if err != nil {
			return nil, err
		}
		c.live, c.liveAt = live, time.Now()
	}
	return c.live, nil
}
