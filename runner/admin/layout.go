package admin

import (
	"slices"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence"
)

// The run view lays its DAG out itself rather than ship a graph library: a
// run's graph is a DAG with known edges, for which a layered drawing
// (Sugiyama's method reduced to its simplest useful steps) is a page of
// code, works offline and renders on the server, so the page needs no
// script to show the graph. Steps: each node's column is the length of the
// longest dependency path to it; within a column, a few sweeps order nodes
// by the mean row of their neighbours to reduce crossings; edges are
// curves from a dependency's right side to the dependent's left.

// Geometry of the drawing, in SVG user units.
const (
	boxW    = 184
	boxH    = 70
	colGap  = 64
	rowGap  = 22
	padding = 16
	idChars = 22 // a longer node id is cut, with its full id in a tooltip
)

// graph is a laid-out DAG, ready for the template.
type graph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	fence.NodeInfo
	X, Y  int
	Label string // the id, cut to idChars
	// BarW is the progress bar's width for a RUNNING node with progress.
	BarW int
	// Note replaces the owner line of a READY node: when it is due, or
	// why it waits (a paused queue, no runner for its kind).
	Note string
}

type graphEdge struct {
	Path  string // SVG path data
	Class string // the dependency's state: how far the flow got
}

// layoutDAG places nodes in columns by longest path from a root and orders
// each column to reduce crossings.
func layoutDAG(nodes []fence.NodeInfo) graph {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		idx[n.ID] = i
	}
	// Column: longest path from a root, memoised; a dependency cycle (which
	// submit refuses) or an unknown dependency is ignored.
	col := make([]int, len(nodes))
	state := make([]byte, len(nodes)) // 0 new, 1 visiting, 2 done
	var visit func(i int) int
	visit = func(i int) int {
		switch state[i] {
		case 1:
			return 0
		case 2:
			return col[i]
		}
		state[i] = 1
		c := 0
		for _, d := range nodes[i].Deps {
			if j, ok := idx[d]; ok {
				c = max(c, visit(j)+1)
			}
		}
		col[i], state[i] = c, 2
		return c
	}
	ncols := 0
	for i := range nodes {
		ncols = max(ncols, visit(i)+1)
	}
	cols := make([][]int, ncols)
	for i := range nodes {
		cols[col[i]] = append(cols[col[i]], i)
	}
	// dependents, for the upward sweeps
	succ := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range n.Deps {
			if j, ok := idx[d]; ok {
				succ[j] = append(succ[j], i)
			}
		}
	}
	row := make([]float64, len(nodes))
	place := func(c []int) {
		for r, i := range c {
			row[i] = float64(r)
		}
	}
	for _, c := range cols {
		place(c)
	}
	order := func(c []int, neigh func(i int) []int) {
		key := make(map[int]float64, len(c))
		for _, i := range c {
			sum, n := 0.0, 0
			for _, j := range neigh(i) {
				sum += row[j]
				n++
			}
			if n == 0 {
				key[i] = row[i]
			} else {
				key[i] = sum / float64(n)
			}
		}
		slices.SortStableFunc(c, func(a, b int) int {
			switch {
			case key[a] < key[b]:
				return -1
			case key[a] > key[b]:
				return 1
			}
			return 0
		})
		place(c)
	}
	deps := func(i int) []int {
		var out []int
		for _, d := range nodes[i].Deps {
			if j, ok := idx[d]; ok {
				out = append(out, j)
			}
		}
		return out
	}
	for range 4 {
		for k := 1; k < ncols; k++ {
			order(cols[k], deps)
		}
		for k := ncols - 2; k >= 0; k-- {
			order(cols[k], func(i int) []int { return succ[i] })
		}
	}
	// Columns are centred on the tallest one.
	tallest := 0
	for _, c := range cols {
		tallest = max(tallest, len(c))
	}
	g := graph{Width: 2*padding + ncols*boxW + max(ncols-1, 0)*colGap,
		Height: 2*padding + tallest*boxH + max(tallest-1, 0)*rowGap}
	pos := make([][2]int, len(nodes))
	for k, c := range cols {
		off := (tallest - len(c)) * (boxH + rowGap) / 2
		for r, i := range c {
			pos[i] = [2]int{padding + k*(boxW+colGap), padding + off + r*(boxH+rowGap)}
		}
	}
	for i, n := range nodes {
		gn := graphNode{NodeInfo: n, X: pos[i][0], Y: pos[i][1], Label: cut(n.ID, idChars)}
		if n.State == "RUNNING" && n.Progress > 0 {
			gn.BarW = (boxW - 20) * min(n.Progress, 100) / 100
		}
		g.Nodes = append(g.Nodes, gn)
		for _, j := range deps(i) {
			x1, y1 := pos[j][0]+boxW, pos[j][1]+boxH/2
			x2, y2 := pos[i][0], pos[i][1]+boxH/2
			mid := (x1 + x2) / 2
			var b strings.Builder
			b.WriteString("M")
			for k, v := range []int{x1, y1, mid, y1, mid, y2, x2 - 6, y2} {
				if k == 2 {
					b.WriteString(" C")
				}
				b.WriteString(" ")
				b.WriteString(strconv.Itoa(v))
			}
			g.Edges = append(g.Edges, graphEdge{Path: b.String(), Class: "edge-" + strings.ToLower(nodes[j].State)})
		}
	}
	return g
}

// cut shortens s to n runes with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
