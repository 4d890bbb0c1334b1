package kinds

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonrun/baton/runner"
)

// Sleep returns a kind that waits for input {"duration": "2s"} (or a number
// of seconds) and reports its progress while it waits. It stands in for
// slow work: demos, tests of takeover and cancellation, watching progress.
// Cancellation ends it at once with an error wrapping context.Cause. A
// takeover starts the wait again from zero: it keeps no checkpoint.
func Sleep() runner.Kind { return runner.KindFunc(sleep) }

type sleepInput struct {
	Duration *duration `json:"duration"`
}

// sleepTick bounds how often progress is reported: every 1/20th of the
// duration, but not more often than this.
const sleepTick = 100 * time.Millisecond

func sleep(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var in sleepInput
	if err := decodeInput("sleep", t.Input, &in); err != nil {
		return nil, err
	}
	if in.Duration == nil {
		return nil, permanentf("sleep", "duration", "required")
	}
	d := time.Duration(*in.Duration)
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("sleep: %w", err)
	}
	slept, _ := json.Marshal(map[string]string{"slept": d.String()}) // cannot fail
	if d == 0 {
		t.SetProgress(100)
		return slept, nil
	}
	start := time.Now()
	t.SetProgress(0)
	done := time.NewTimer(d)
	defer done.Stop()
	tick := time.NewTicker(max(d/20, sleepTick))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sleep: stopped after %s of %s: %w",
				time.Since(start).Round(time.Millisecond), d, context.Cause(ctx))
		case <-tick.C:
			t.SetProgress(int(100 * time.Since(start).Seconds() / d.Seconds()))
		case <-done.C:
			t.SetProgress(100)
			return slept, nil
		}
	}
}
