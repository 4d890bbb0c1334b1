package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Events in one millisecond keep the stream's order, whatever their
// ranks say, and rows from outside the stream fall in between by rank.
func TestTimelineKeepsStreamOrderWithinAMillisecond(t *testing.T) {
	t.Parallel()
	ms := time.UnixMilli(1_700_000_000_000)
	rows := []row{
		{at: ms, seq: 0, event: "committed", rank: ranks["committed"]}, // build commits...
		{at: ms, seq: 1, event: "claimed", rank: ranks["claimed"]},     // ...and its successor is claimed
		{at: ms, seq: 2, event: "committed", rank: ranks["committed"]}, // ...and commits, all in 1 ms
		{at: ms, seq: -1, event: "api_admitted", rank: ranks["api_admitted"]},
		{at: ms.Add(-time.Millisecond), seq: -1, event: "(paused)", rank: ranks["(paused)"]},
	}
	var got []string
	for _, r := range mergeRows(rows) {
		got = append(got, r.event)
	}
	assert.Equal(t, []string{"(paused)", "committed", "claimed", "api_admitted", "committed"}, got)
}

// A downstream call of node@epoch lands between that claim and that
// commit, even when its millisecond and rank would put it later.
func TestTimelinePutsCallsInsideTheirAttempt(t *testing.T) {
	t.Parallel()
	ms := time.UnixMilli(1_700_000_000_000)
	rows := []row{
		{at: ms, seq: 0, event: "claimed", node: "migrate", epoch: "e1", rank: ranks["claimed"]},
		{at: ms, seq: 1, event: "committed", node: "migrate", epoch: "e1", rank: ranks["committed"]},
		{at: ms, seq: 2, event: "claimed", node: "deploy", epoch: "e1", rank: ranks["claimed"]},
		{at: ms, seq: -1, event: "api_admitted", node: "migrate", epoch: "e1", rank: ranks["api_admitted"]},
	}
	var got []string
	for _, r := range mergeRows(rows) {
		got = append(got, r.event+" "+r.node)
	}
	assert.Equal(t, []string{"claimed migrate", "api_admitted migrate", "committed migrate", "claimed deploy"}, got)
}
