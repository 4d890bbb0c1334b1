package fence_test

import (
	"testing"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// The waits' regression checks hold on a 3-master Redis Cluster too:
// every wait script touches one slot, the thread's (park, resume,
// wait_keep, retry, promote), and the checks run in order on one cluster.
func TestWaitsOnCluster(t *testing.T) {
	t.Parallel()
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	be := redistest.Backend{Name: "cluster", Client: rc.Client()}
	for _, c := range []struct {
		name  string
		check func(*testing.T, *testBundle)
	}{
		{"retry clears wait answers", checkRetryClearsWaitAnswers},
		{"resume resent after later events", checkResumeResentAfterLaterEvents},
		{"bad input", checkWaitBadInput},
		{"promote after the active run was packed", checkPromoteAfterTheActiveRunWasPacked},
		{"park keeps the thread's state", checkParkKeepsTheThreadsState},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, &testBundle{be: be, store: fence.New(be.Client, nil), ctx: t.Context()})
		})
	}
}
