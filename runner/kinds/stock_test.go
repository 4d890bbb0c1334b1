package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// TestMain fails the package when a goroutine started by a kind outlives
// the tests: every kind must join what it starts before Run returns.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := kindGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of package kinds outlived their Run:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// kindGoroutines returns the stacks of goroutines running code of package
// kinds (not kinds_test), after giving exiting ones up to a second.
func kindGoroutines() string {
	var leaked []string
	for deadline := time.Now().Add(time.Second); ; {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "baton/runner/kinds.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		runtime.Gosched()
	}
}

// testLease is the lease every test task runs under.
var testLease = fence.Lease{Run: "r1", Node: "n1", Attempt: 2, Epoch: 7, ClaimID: "abc", Thread: "r1"}

func newTask(kind, input string) *runner.Task {
	return runner.NewTask(testLease, kind, json.RawMessage(input), 0)
}

// The worker is what RegisterStock is for.
var _ kinds.Registrar = (*runner.Worker)(nil)

type registry map[string]runner.Kind

func (r registry) Register(kind string, k runner.Kind) { r[kind] = k }

func TestRegisterStockRegistersTheFourKindsRunSpecsName(t *testing.T) {
	t.Parallel()
	r := registry{}
	kinds.RegisterStock(r)

	require.ElementsMatch(t, []string{"exec", "http", "sleep", "noop"}, mapKeys(r))
	out, err := r["noop"].Run(context.Background(), newTask("noop", `{"x":1}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"x":1}`, string(out))
	out, err = r["exec"].Run(context.Background(), newTask("exec", `{"command":["echo","hi"]}`))
	require.NoError(t, err)
	assert.JSONEq(t, `"hi"`, string(out))
}

func mapKeys(r registry) []string {
	var ks []string
	for k := range r {
		ks = append(ks, k)
	}
	return ks
}
