package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// uiRunStatuses are the statuses a run can have, for the list's filter.
var uiRunStatuses = []string{"QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}

// runsData is the run list (GET / and /runs): one page of runs, newest
// first, and the links to the next page and back to the first.
type runsData struct {
	Status, Thread string
	Statuses       []string
	Runs           []runRow
	Next           string // query of the next (older) page; "" on the last
	First          string // query of the first page, when this is not it
	Scanned        bool   // the filter stopped at uiScanLimit entries
}

type runRow struct {
	fence.RunSummary
	Age     string
	Created time.Time
	Pct     int
}

func (u *ui) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := runsData{Status: strings.ToUpper(q.Get("status")), Thread: q.Get("thread"), Statuses: uiRunStatuses}
	if d.Status != "" && !slices.Contains(uiRunStatuses, d.Status) {
		u.fail(w, r, fmt.Errorf("status %q: want one of %s: %w", d.Status, strings.Join(uiRunStatuses, ", "), fence.ErrInvalidID))
		return
	}
	if d.Thread != "" {
		if err := fence.ValidateID("thread", d.Thread); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	offset, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	offset = max(offset, 0)
	store := u.client.Store()
	pos, scanned := offset, int64(0)
	more := true
	for len(d.Runs) < uiRunsPerPage && more && scanned < uiScanLimit {
		const chunk = 200
		listed, err := store.ListRunsAt(r.Context(), pos, chunk)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		more = len(listed) == chunk
		ids := make([]string, len(listed))
		at := make(map[string]time.Time, len(listed))
		for i, l := range listed {
			ids[i], at[l.ID] = l.ID, l.SubmittedAt
		}
		sums, err := store.Summaries(r.Context(), ids)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		byID := make(map[string]fence.RunSummary, len(sums))
		for _, s := range sums {
			byID[s.ID] = s
		}
		for i, id := range ids {
			scanned++
			s, ok := byID[id]
			if !ok || (d.Status != "" && s.Status != d.Status) || (d.Thread != "" && s.Thread != d.Thread && s.ID != d.Thread) {
				continue
			}
			row := runRow{RunSummary: s, Created: at[id], Age: age(u.now().Sub(at[id]))}
			if s.Nodes > 0 {
				row.Pct = 100 * s.Done / s.Nodes
			}
			d.Runs = append(d.Runs, row)
			if len(d.Runs) == uiRunsPerPage {
				more = more || i < len(ids)-1
				pos += int64(i + 1)
				break
			}
		}
		if len(d.Runs) < uiRunsPerPage {
			pos += int64(len(ids))
		}
	}
	d.Scanned = more && scanned >= uiScanLimit && len(d.Runs) < uiRunsPerPage
	keep := url.Values{}
	if d.Status != "" {
		keep.Set("status", d.Status)
	}
	if d.Thread != "" {
		keep.Set("thread", d.Thread)
	}
	if more {
		nq := url.Values{}
		for k, v := range keep {
			nq[k] = v
		}
		nq.Set("from", strconv.FormatInt(pos, 10))
		d.Next = "?" + nq.Encode()
	}
	if offset > 0 {
		d.First = "?" + keep.Encode()
	}
	u.render(w, r, http.StatusOK, "runs", "page", page{Title: "Runs", Nav: "runs", Data: d})
}

// age says how long ago, in the largest unit that fits.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}
