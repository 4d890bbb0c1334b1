package admin

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// Fleet states of a runner, as /workers shows them.
const (
	fleetOK   = "ok"
	fleetNear = "near expiry"
	fleetLost = "lost"
)

// fleetRow is one runner on /workers.
type fleetRow struct {
	fence.FleetEntry
	State  string
	Why    string // what made it near expiry or lost
	Silent string // since its last advertisement
	Left   string // lease time left now, on Redis's clock, for its earliest lease
	Margin string // lease time left at its last renewal
	RTT    string
}

// classify judges a runner from its last advertisement, at now (the
// admin server's clock) and redisNow (Redis's, for lease deadlines).
//
//   - lost: its advertisement expired, or it holds leases whose deadline
//     has passed without it being heard from since: those nodes are being
//     taken over.
//   - near expiry: its last renewal found less than a third of the lease
//     left (what the lease_nearly_expired log line says), its earliest lease
//     has less than a third of the TTL left, or it has been silent for two
//     advertisement periods (paused, partitioned or starved).
//   - ok otherwise.
func classify(e fence.FleetEntry, now, redisNow time.Time) fleetRow {
	row := fleetRow{FleetEntry: e, State: fleetOK}
	if e.Expired {
		row.State, row.Why = fleetLost, "advertisement expired"
	}
	if !e.SeenAt.IsZero() {
		row.Silent = age(now.Sub(e.SeenAt))
	}
	h := e.Health
	if h == nil {
		return row
	}
	if !h.RenewedAt.IsZero() { // no renewal yet: nothing measured
		row.RTT = ms(h.RTTMs)
		row.Margin = secs(time.Duration(h.MarginMs) * time.Millisecond)
	}
	if row.State == fleetLost {
		return row // what it last said, for the record
	}
	ttl := time.Duration(e.LeaseTTLMs) * time.Millisecond
	every := time.Duration(e.AdvertiseEveryMs) * time.Millisecond
	silent := now.Sub(e.SeenAt)
	if !h.LeaseUntil.IsZero() {
		left := h.LeaseUntil.Sub(redisNow)
		row.Left = secs(left)
		switch {
		case left <= 0 && silent > every:
			row.State, row.Why = fleetLost, "its leases ran out without a renewal"
			return row
		case ttl > 0 && left < ttl/3 && silent > every:
			row.State, row.Why = fleetNear, "lease ends in "+secs(left)
		}
	}
	switch {
	case row.State != fleetOK:
	case every > 0 && silent > 2*every:
		row.State, row.Why = fleetNear, "silent for "+secs(silent)
	case ttl > 0 && len(h.Running) > 0 && !h.RenewedAt.IsZero() &&
		time.Duration(h.MarginMs)*time.Millisecond < ttl/3:
		row.State, row.Why = fleetNear, "last renewal had "+row.Margin+" left"
	}
	return row
}

func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "ms" }

type workersData struct {
	Rows             []fleetRow
	Live, Near, Lost int
	RedisTimeUnknown bool
	Limits           []limitRow
	LimitsError      string // the limits could not be read; the runners still show
}

// limitShownKeys bounds the keys of one prefix rule the fleet view lists
// under it (the most recently claimed); its totals count every key read.
const limitShownKeys = 20

// limitRow is one limit on /workers: its totals, and for a prefix rule the
// keys it covered lately.
type limitRow struct {
	fence.Limit
	Set   string // "8 at once, 600/m (burst 20)"
	Rule  bool
	Total fence.LimitKeyState
	Keys  []fence.LimitKeyState // a rule's, at most limitShownKeys
	More  int                   // a rule's keys not listed
}

func newLimitRow(s fence.LimitState) limitRow {
	r := limitRow{Limit: s.Limit, Rule: strings.HasSuffix(s.Name, "*"), Total: s.Total()}
	var set []string
	if s.Concurrency > 0 {
		set = append(set, strconv.Itoa(s.Concurrency)+" at once")
	}
	if s.Rate > 0 {
		rate := s.RateString()
		if s.Burst > 0 {
			rate += " (burst " + strconv.Itoa(s.Burst) + ")"
		}
		set = append(set, rate)
	}
	r.Set = strings.Join(set, ", ")
	if r.Rule {
		r.Keys = s.Keys[:min(len(s.Keys), limitShownKeys)]
		r.More = len(s.Keys) - len(r.Keys)
	}
	return r
}

func (u *ui) loadFleet(r *http.Request) (workersData, error) {
	entries, err := u.client.Store().Fleet(r.Context())
	if err != nil {
		return workersData{}, err
	}
	now := u.now()
	var d workersData
	redisNow, err := u.rdb.Time(r.Context()).Result()
	if err != nil {
		redisNow, d.RedisTimeUnknown = now, true
	}
	for _, e := range entries {
		row := classify(e, now, redisNow)
		switch row.State {
		case fleetOK:
			d.Live++
		case fleetNear:
			d.Near++
		case fleetLost:
			d.Lost++
		}
		d.Rows = append(d.Rows, row)
	}
	limits, err := u.client.Store().LimitStates(r.Context())
	if err != nil {
		u.log.Warn("ui_limits_unreadable", "err", err)
		d.LimitsError = err.Error()
	}
	for _, l := range limits {
		d.Limits = append(d.Limits, newLimitRow(l))
	}
	return d, nil
}
