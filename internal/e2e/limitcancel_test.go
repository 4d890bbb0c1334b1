package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A limit of 1, a holder and two waiters. The holder ends and its slot is
// handed to the first waiter, whose runner is paused (SIGSTOP) before it
// can claim it; `enqueue cancel` of that waiter's run hands the slot to
// the third node at once, instead of it sitting out the 10 s hold.
func TestCancelledWaiterHandsItsSlotOn(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	_, errOut, code := c.enqueue("", "limit", "set", "one", "--concurrency", "1")
	require.Equal(t, 0, code, errOut)
	gate := filepath.Join(t.TempDir(), "gate")
	c.startRunner("r0", nil)
	paused := c.startRunner("r1", map[string]string{"QUEUES": "side=1"})
	defer paused.signal(t, syscall.SIGCONT)

	hold := c.submit(fmt.Sprintf(`{"id":"holder","nodes":[{"id":"a","kind":"exec","limits":["one"],"input":%s}]}`,
		sh(fmt.Sprintf(`while [ ! -e %q ]; do sleep 0.02; done; echo held`, gate))))
	waitUntil(t, 20*time.Second, "the holder to hold the slot", func() bool {
		inUse, _ := c.limitUse("one", "one")
		return inUse == 1
	})
	c.submit(`{"id":"waiter","nodes":[{"id":"a","kind":"noop","queue":"side","limits":["one"]}]}`)
	waitUntil(t, 20*time.Second, "the waiter to wait", func() bool {
		_, waiting := c.limitUse("one", "one")
		return waiting == 1
	})
	third := c.submit(`{"id":"third","nodes":[{"id":"a","kind":"noop","limits":["one"]}]}`)
	waitUntil(t, 20*time.Second, "the third node to wait behind it", func() bool {
		_, waiting := c.limitUse("one", "one")
		return waiting == 2
	})

	paused.signal(t, syscall.SIGSTOP) // the waiter's runner cannot claim what it is handed
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.Equal(t, 0, c.watch(hold))
	inUse, waiting := c.limitUse("one", "one")
	require.Equal(t, 1, inUse, "the slot is handed to the waiter")
	require.Equal(t, 1, waiting, "the third node still waits")
	require.Equal(t, "READY", c.status(third).node("a").State)

	cancelled := time.Now()
	_, errOut, code = c.enqueue("", "cancel", "waiter")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 0, c.watch(third))
	took := time.Since(cancelled)
	require.Equal(t, "SUCCEEDED", c.status(third).Status)
	require.Less(t, took, 5*time.Second, "the third node got the slot at once, not after the 10 s hold")
	require.Equal(t, "CANCELLED", c.status("waiter").Status)
	inUse, waiting = c.limitUse("one", "one")
	require.Zero(t, inUse, "no slot left held")
	require.Zero(t, waiting)
}
