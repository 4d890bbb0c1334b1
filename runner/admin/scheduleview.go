package admin

import (
	"cmp"
	"net/http"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// schedulesData is the schedules page (GET /schedules): every schedule
// with its next and last tick, and the state of the run the last tick
// submitted.
type schedulesData struct {
	Rows []scheduleRow
}

// scheduleRow is one schedule on /schedules.
type scheduleRow struct {
	client.ScheduleStatus
	// Zone is the time zone the expression is read in ("UTC" when unset);
	// Missed is the policy, its default spelt out.
	Zone, Missed string
	// Thread and Multitask are each tick's: the schedule's, or else its
	// run spec's.
	Thread, Multitask string
	// NextIn says how far the next tick is from now (Redis's clock);
	// NextZoned, LastZoned are the ticks in the schedule's zone when it is
	// not UTC: a cron is written in that zone.
	NextIn               string
	NextZoned, LastZoned string
	// Run is the last tick's run, if it still exists (RUNNING, SUCCEEDED,
	// ...); nil once deleted by retention.
	Run *fence.RunSummary
}

func (u *ui) loadSchedules(r *http.Request) (schedulesData, error) {
	list, err := u.client.Schedules(r.Context())
	if err != nil {
		return schedulesData{}, err
	}
	now, err := u.rdb.Time(r.Context()).Result()
	if err != nil {
		now = u.now()
	}
	var ids []string
	for _, s := range list {
		if s.LastRun != "" {
			ids = append(ids, s.LastRun)
		}
	}
	runs := map[string]fence.RunSummary{}
	if len(ids) > 0 {
		sums, err := u.client.Store().Summaries(r.Context(), ids)
		if err != nil {
			return schedulesData{}, err
		}
		for _, s := range sums {
			runs[s.ID] = s
		}
	}
	d := schedulesData{Rows: make([]scheduleRow, 0, len(list))}
	for _, s := range list {
		row := scheduleRow{ScheduleStatus: s, Zone: s.TZ, Missed: s.Missed,
			Thread: s.Thread, Multitask: s.Multitask}
		if row.Zone == "" {
			row.Zone = "UTC"
		}
		if row.Missed == "" {
			row.Missed = spec.MissedSkip
		}
		if s.Run != nil {
			row.Thread = cmp.Or(row.Thread, s.Run.Thread)
			row.Multitask = cmp.Or(row.Multitask, s.Run.Multitask)
		}
		if row.Thread == "" {
			row.Multitask = "" // each tick's run is a thread of its own
		} else if row.Multitask == "" {
			row.Multitask = "reject" // spec.Run's default with a thread
		}
		if !s.Next.IsZero() {
			row.NextIn = age(s.Next.Sub(now))
		}
		if loc, err := time.LoadLocation(s.TZ); err == nil && s.TZ != "" && s.TZ != "UTC" {
			row.NextZoned = s.Next.In(loc).Format(viewTime)
			if s.Last != nil {
				row.LastZoned = s.Last.In(loc).Format(viewTime)
			}
		}
		if run, ok := runs[s.LastRun]; ok {
			row.Run = &run
		}
		d.Rows = append(d.Rows, row)
	}
	return d, nil
}
