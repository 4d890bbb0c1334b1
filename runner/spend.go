package runner

import (
	"fmt"

	"github.com/batonrun/baton/fence"
)

// Spend reports a cost the handler learned after the call, such as the
// tokens a model used: the node's claim took the cost its spec names from
// each rate limit the node named with a cost ({"name": "openai-tpm",
// "cost": 2000}), and the commit or fail that ends this attempt charges
// the difference (the total reported minus that cost) to those limits, or
// refunds it, on Redis's clock and in the same script. So a
// tokens-per-minute limit follows what was really used.
//
// Calls add up (one per model call of the attempt). n must be a whole
// number from 0 to 2^40, and so must the total: anything else is an
// error wrapping fence.ErrInvalidData and changes nothing. A released,
// parked or abandoned attempt keeps the claim's cost, whatever it
// reported; limits named by name alone count claims and are never
// charged; a stale owner's report changes nothing (its end is fenced).
func (t *Task) Spend(n int64) error {
	if err := fence.CheckSpend(n); err != nil {
		return err
	}
	for {
		old := t.spent.Load() // total + 1; 0: none reported
		total := max(old-1, 0) + n
		if total > fence.MaxSpend {
			return fmt.Errorf("%w: spend %d: the attempt's total %d would pass 2^40", fence.ErrInvalidData, n, total)
		}
		if t.spent.CompareAndSwap(old, total+1) {
			return nil
		}
	}
}

// Spent returns the total cost reported with Spend, and whether any was.
func (t *Task) Spent() (int64, bool) {
	v := t.spent.Load()
	return max(v-1, 0), v > 0
}

// spend is what the attempt's end charges (fence.Spend).
func (t *Task) spend() fence.Spend {
	n, ok := t.Spent()
	return fence.Spend{Cost: n, Reported: ok}
}
