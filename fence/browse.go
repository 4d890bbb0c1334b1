package fence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ListedRun is one entry of the run listing: a run id and when it was
// submitted (the submitter's clock, the listing's order).
type ListedRun struct {
	ID          string
	SubmittedAt time.Time
}

// ListRunsAt is ListRuns with each run's submit time, for a view that
// shows runs' ages.
func (s *Store) ListRunsAt(ctx context.Context, offset, limit int64) ([]ListedRun, error) {
	zs, err := s.listRuns(ctx, offset, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ListedRun, len(zs))
	for i, z := range zs {
		id, _ := z.Member.(string)
		out[i] = ListedRun{ID: id, SubmittedAt: time.UnixMilli(int64(z.Score))}
	}
	return out, nil
}

// NodeInput returns a node's input as submitted (JSON text). GetRun leaves
// inputs out: they can be large, and a view needs one at a time.
func (s *Store) NodeInput(ctx context.Context, run, node string) (json.RawMessage, error) {
	if err := ValidateID("run id", run); err != nil {
		return nil, err
	}
	if err := ValidateID("node id", node); err != nil {
		return nil, err
	}
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return nil, err
	}
	v, err := s.rdb.HMGet(ctx, s.keys.Node(thread, run, node), "state", "input").Result()
	if err != nil {
		return nil, fmt.Errorf("node %s/%s: %w", run, node, err)
	}
	in, _ := v[1].(string)
	if v[0] == nil { // packed, or gone
		p, err := s.packedOf(ctx, thread, run)
		if err != nil {
			return nil, err
		}
		h := p.nodeOrNil(node)
		if h == nil {
			return nil, fmt.Errorf("node %s/%s: %w", run, node, ErrNotFound)
		}
		in = h["input"]
	}
	if in == "" || !json.Valid([]byte(in)) {
		return nil, nil
	}
	return json.RawMessage(in), nil
}
