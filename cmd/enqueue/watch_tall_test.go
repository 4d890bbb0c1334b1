package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// screen is the little of a VT100 that watch uses: printable text with
// autowrap, CR, LF (as the tty's onlcr makes it: CR LF), cursor up
// (ESC[nA), erase below (ESC[J), and the cursor's visibility (ignored).
// Lines pushed off the top are counted: that is scrolling.
type screen struct {
	rows, cols int
	cells      [][]rune
	r, c       int
	scrolled   int
}

func newScreen(rows, cols int) *screen {
	s := &screen{rows: rows, cols: cols}
	for range rows {
		s.cells = append(s.cells, []rune(strings.Repeat(" ", cols)))
	}
	return s
}

func (s *screen) lineFeed() {
	if s.r == s.rows-1 {
		s.cells = append(s.cells[1:], []rune(strings.Repeat(" ", s.cols)))
		s.scrolled++
		return
	}
	s.r++
}

func (s *screen) Write(p []byte) (int, error) {
	in := []rune(string(p))
	for i := 0; i < len(in); i++ {
		switch ch := in[i]; ch {
		case '\r':
			s.c = 0
		case '\n':
			s.lineFeed()
			s.c = 0
		case 0x1b:
			j := i + 2 // past ESC [
			for j < len(in) && !(in[j] >= '@' && in[j] <= '~') {
				j++
			}
			params, final := string(in[i+2:j]), in[j]
			switch final {
			case 'A':
				n, _ := strconv.Atoi(params)
				s.r = max(s.r-max(n, 1), 0)
			case 'J':
				for c := s.c; c < s.cols; c++ {
					s.cells[s.r][c] = ' '
				}
				for r := s.r + 1; r < s.rows; r++ {
					s.cells[r] = []rune(strings.Repeat(" ", s.cols))
				}
			}
			i = j
		default:
			if s.c == s.cols { // autowrap
				s.lineFeed()
				s.c = 0
			}
			s.cells[s.r][s.c] = ch
			s.c++
		}
	}
	return len(p), nil
}

func (s *screen) text() []string {
	var out []string
	for _, l := range s.cells {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	return out
}

// tallRun is a run of n nodes: the first running nodes running, the next
// done nodes succeeded, the rest blocked.
func tallRun(n, running, done int, status string) *fence.RunInfo {
	info := &fence.RunInfo{ID: "tall", Status: status, CreatedAt: time.Now().Add(-3 * time.Second)}
	for i := range n {
		st := "BLOCKED"
		switch {
		case i < running:
			st = "RUNNING"
		case i < running+done:
			st = "SUCCEEDED"
		}
		info.Nodes = append(info.Nodes, fence.NodeInfo{ID: fmt.Sprintf("node-%03d", i), Kind: "noop", State: st,
			Attempt: 1, Epoch: 1, Owner: "runner-with-a-long-name-" + strconv.Itoa(i%3), Progress: 40})
	}
	return info
}

// watch on a run of 120 nodes in a 12×60 terminal: every redraw lands
// on the same screen lines, nothing scrolls, no line wraps, and after the
// last one the screen holds that frame and nothing else. The running
// nodes are the ones shown; the rest are counted.
func TestWatchTallRunInSmallTerminal(t *testing.T) {
	t.Parallel()
	const rows, cols = 12, 60
	scr := newScreen(rows, cols)
	v := newTableView(scr, func() (int, int) { return rows, cols })

	require.NoError(t, v.show(tallRun(120, 0, 0, "RUNNING")))
	require.NoError(t, v.show(tallRun(120, 3, 40, "RUNNING")))
	first := scr.text()
	assert.Contains(t, first[2], "node-000")
	assert.Contains(t, first[2], "RUNNING", "running nodes come first")
	assert.Contains(t, first[rows-2], "... 112 more nodes: 72 BLOCKED, 40 SUCCEEDED")

	require.NoError(t, v.show(tallRun(120, 0, 120, "SUCCEEDED")))
	v.close()

	assert.Zero(t, scr.scrolled, "a frame taller than the screen scrolls, and the next redraw leaves garbage")
	got := scr.text()
	assert.True(t, strings.HasPrefix(got[0], "run tall  SUCCEEDED  120/120 nodes done"), got[0])
	assert.True(t, strings.HasPrefix(got[1], "NODE"), got[1])
	for i, l := range got[2 : rows-2] {
		assert.Contains(t, l, "SUCCEEDED", "line %d", i+2)
		assert.NotContains(t, l, "RUNNING", "line %d: left over from an earlier frame", i+2)
	}
	assert.Equal(t, "... 112 more nodes: 112 SUCCEEDED", got[rows-2])
	assert.Empty(t, got[rows-1], "the last row stays free")
}

// A run that fits is drawn whole, every node in spec order.
func TestWatchShortRunIsWhole(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := newTableView(&out, func() (int, int) { return 40, 200 })
	require.NoError(t, v.show(tallRun(5, 1, 2, "RUNNING")))
	assert.NotContains(t, out.String(), "more nodes")
	for i := range 5 {
		assert.Contains(t, out.String(), fmt.Sprintf("node-%03d", i))
	}
}
