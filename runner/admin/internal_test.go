package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A session is accepted until it expires, by any server with the same
// token, and never once tampered with or after the token changed.
func TestSessions(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	s := newSessions("tok", time.Hour)
	s.now = func() time.Time { return now }
	v, exp := s.issue()
	assert.Equal(t, now.Add(time.Hour), exp)
	assert.True(t, s.valid(v))
	assert.NotContains(t, v, "tok")

	other := newSessions("tok", time.Minute) // another runner of the fleet
	other.now = s.now
	assert.True(t, other.valid(v))
	rotated := newSessions("tok2", time.Hour)
	rotated.now = s.now
	assert.False(t, rotated.valid(v), "a rotated token revokes every session")

	parts := strings.Split(v, ".")
	require.Len(t, parts, 4)
	parts[1] = "9999999999" // a longer life, signed by nobody
	assert.False(t, s.valid(strings.Join(parts, ".")))
	for _, bad := range []string{"", "tok", "v1.", "v1.x.y.z", v + "x"} {
		assert.False(t, s.valid(bad), bad)
	}
	now = now.Add(time.Hour)
	assert.False(t, s.valid(v), "expired")
}

// The login's next parameter only leads to a path on this server.
func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/runs/x?status=FAILED": "/runs/x?status=FAILED",
		"//evil.example/":       "",
		"/\\evil.example":       "",
		"https://evil.example/": "",
		"runs":                  "",
		"/runs\r\nX: y":         "",
		"/\t/evil.example":      "",
		"/ /evil.example":       "",
		"/runs/x#frag":          "/runs/x",
		"/%09/evil.example":     "/%09/evil.example",
	} {
		assert.Equal(t, want, localPath(in), in)
	}
}

// classify reads a runner's advertisement the way the fleet view shows
// it.
func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	entry := func(silent, left time.Duration, marginMs int64) fence.FleetEntry {
		return fence.FleetEntry{WorkerInfo: fence.WorkerInfo{ID: "w", SeenAt: now.Add(-silent), LeaseTTLMs: 30000,
			AdvertiseEveryMs: 3000, Health: &fence.WorkerHealth{
				Running:   []fence.RunningNode{{Run: "r", Node: "n", Epoch: 1}},
				RenewedAt: now.Add(-silent), MarginMs: marginMs, LeaseUntil: now.Add(left)}}}
	}
	for _, c := range []struct {
		name  string
		e     fence.FleetEntry
		state string
	}{
		{"healthy", entry(time.Second, 25*time.Second, 20000), fleetOK},
		{"thin margin at the last renewal", entry(time.Second, 25*time.Second, 5000), fleetNear},
		{"silent for two refresh periods", entry(7*time.Second, 18*time.Second, 20000), fleetNear},
		{"silent, lease nearly over", entry(4*time.Second, 5*time.Second, 20000), fleetNear},
		{"silent, lease over", entry(31*time.Second, -time.Second, 20000), fleetLost},
		{"advertisement expired", fence.FleetEntry{WorkerInfo: fence.WorkerInfo{ID: "w"}, Expired: true}, fleetLost},
		{"an older runner without health", fence.FleetEntry{WorkerInfo: fence.WorkerInfo{ID: "w", SeenAt: now}}, fleetOK},
	} {
		assert.Equal(t, c.state, classify(c.e, now, now).State, c.name)
	}
}

// The layout puts each node right of all its dependencies and never two
// nodes on one spot.
func TestLayoutDAG(t *testing.T) {
	t.Parallel()
	nodes := []fence.NodeInfo{
		{ID: "a"}, {ID: "b", Deps: []string{"a"}}, {ID: "c", Deps: []string{"a"}},
		{ID: "d", Deps: []string{"b", "c"}}, {ID: "e", Deps: []string{"a", "d"}}, {ID: "lone"},
	}
	g := layoutDAG(nodes)
	pos := map[string][2]int{}
	seen := map[[2]int]string{}
	for _, n := range g.Nodes {
		p := [2]int{n.X, n.Y}
		require.Empty(t, seen[p], "%s and %s overlap", n.ID, seen[p])
		seen[p], pos[n.ID] = n.ID, p
		assert.LessOrEqual(t, n.X+boxW, g.Width)
		assert.LessOrEqual(t, n.Y+boxH, g.Height)
	}
	for _, n := range nodes {
		for _, d := range n.Deps {
			assert.Less(t, pos[d][0], pos[n.ID][0], "%s is right of its dependency %s", n.ID, d)
		}
	}
	assert.Len(t, g.Edges, 6)
	assert.Equal(t, pos["a"][0], pos["lone"][0], "roots share the first column")
	assert.Equal(t, "a-very-long-node-id-t…", cut("a-very-long-node-id-that-goes-on", idChars))
}
