package fence

import (
	"context"
	"time"
)

// UnpackForTest reads the run hash and node hashes of a run packed into
// one key (lib/pack.lua), for the tests of package fence_test that check
// what a packed run holds.
func UnpackForTest(b []byte) (map[string]string, []map[string]string, error) {
	p, err := unpackRun(b)
	if err != nil {
		return nil, nil, err
	}
	return p.Run, p.Nodes, nil
}

// TakeLimitsForTest is the take step of a claim on a Redis Cluster
// (limitcluster.go) alone, as a claimer that crashes before its claim
// leaves it: the outcome for claim.lua and the keys taken.
func (s *Store) TakeLimitsForTest(ctx context.Context, n NodeRef, claimID, limits, last, queue string,
	ttl time.Duration) (string, []string, error) {
	t, err := s.takeLimits(ctx, n, claimID, limits, last, queue, ttl)
	return t.outcome, t.taken, err
}

// FreeLimitsForTest is the free step that follows the end of l's claim on
// a Redis Cluster, alone (a late or replayed free).
func (s *Store) FreeLimitsForTest(ctx context.Context, l Lease) {
	s.freeClustered(ctx, l, Spend{}, false)
}
