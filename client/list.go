package client

import (
	"context"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// ListOptions selects the runs ListRuns returns.
type ListOptions struct {
	Status string // only runs in this status; empty: any
	// Thread keeps the runs of one thread only; a run without a thread is
	// the thread of its own id. Empty: any.
	Thread string
	Limit  int // at most this many; zero: 50
}

// ListRuns returns runs, newest first, as o selects them. It reads the
// listing a page at a time (two round trips a page) until it has o.Limit
// runs or the listing ends.
func (c *Client) ListRuns(ctx context.Context, o ListOptions) ([]RunSummary, error) {
	if o.Thread != "" {
		if err := fence.ValidateID("thread", o.Thread); err != nil {
			return nil, err
		}
	}
	if o.Limit <= 0 {
		o.Limit = 50
	}
	out := []RunSummary{}
	const page = 200
	for offset := int64(0); len(out) < o.Limit; offset += page {
		ids, err := c.store.ListRuns(ctx, offset, page)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		sums, err := c.store.Summaries(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, s := range sums {
			if (o.Status == "" || s.Status == o.Status) && (o.Thread == "" || s.Thread == o.Thread || (s.Thread == "" && s.ID == o.Thread)) {
				out = append(out, s)
				if len(out) == o.Limit {
					break
				}
			}
		}
		if len(ids) < page {
			break
		}
	}
	return out, nil
}
