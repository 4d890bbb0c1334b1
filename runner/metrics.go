package runner

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the worker's Prometheus series, all prefixed baton_.
type Metrics struct {
	Claims         *prometheus.CounterVec // by outcome
	Commits        prometheus.Counter
	StaleRejected  *prometheus.CounterVec // by op
	Takeovers      prometheus.Counter
	Failures       *prometheus.CounterVec // by outcome: retry, failed, cancelled
	Releases       prometheus.Counter
	Running        prometheus.Gauge
	SweeperActions *prometheus.CounterVec // by action
	NodesUnserved  prometheus.Gauge
	HeartbeatRTT   prometheus.Histogram
	LeaseLeft      prometheus.Histogram
	PoisonTasks    prometheus.Counter
	// CommitsAlone counts commits held for their task's acknowledgement
	// that went alone, the acknowledgement never having come (trip.go).
	CommitsAlone prometheus.Counter
	// ScheduleSteps counts this runner's scheduler steps by outcome
	// (scheduler.go).
	ScheduleSteps *prometheus.CounterVec

	claimed prometheus.Counter // Claims{outcome="claimed"}, resolved once: every node counts it
}

// NewMetrics creates the series and registers them with reg (nil: not
// registered, e.g. in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_claims_total",
			Help: "Claims by outcome: claimed, takeover, continued (claimed by the predecessor's commit), taken (claimed from the queue by a commit: a node of another run, or of the same run that is not its dependent), busy, done, blocked, not_due, wrong_kind (refused: this worker lacks the node's kind), expired, missing, error."}, []string{"outcome"}),
		Commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_commits_total",
			Help: "Nodes committed as SUCCEEDED by this worker."}),
		StaleRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_stale_writes_rejected_total",
			Help: "Writes of this worker refused because it no longer owned the node, by op."}, []string{"op"}),
		Takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_takeovers_total",
			Help: "Nodes this worker took over from an owner whose lease expired."}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_failures_total",
			Help: "Failed attempts by outcome: retry, failed, cancelled."}, []string{"outcome"}),
		Releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_releases_total",
			Help: "Leases released on shutdown for another worker to resume."}),
		Running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_nodes_running",
			Help: "Nodes this worker is running now."}),
		NodesUnserved: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_nodes_unserved",
			Help: "READY nodes this runner's sweeper found waiting for a kind and queue that no live runner serves (sum over runners)."}),
		SweeperActions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_sweeper_actions_total",
			Help: "What the sweeper did, by action: expired_lease, stale_ready (nodes re-enqueued), wait_timed_out, run_timed_out (runs its run-level timeout cancelled)."}, []string{"action"}),
		HeartbeatRTT: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_heartbeat_rtt_seconds",
			Help: "Round trip of one batched heartbeat pipeline.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		LeaseLeft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_lease_left_seconds",
			Help: "Lease time left when a renewal succeeded; near zero means leases are at risk.", Buckets: []float64{0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120}}),
		PoisonTasks: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_poison_tasks_total",
			Help: "Queue tasks archived because their payload was malformed."}),
		CommitsAlone: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_commits_unacknowledged_total",
			Help: "Commits held to go with their task's Asynq acknowledgement that went alone after a wait, the acknowledgement never having come."}),
		ScheduleSteps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_schedule_steps_total",
			Help: "Cron schedule steps this runner made, by outcome: created (a tick's run submitted), existed (another runner had submitted it), skipped_busy (the schedule's thread was busy under reject), skipped_missed (missed ticks dropped), problem (a stored schedule that does not validate), error (Redis unreachable: retried)."}, []string{"outcome"}),
	}
	m.claimed = m.Claims.WithLabelValues("claimed")
	// The labels alerts and dashboards read are exported at zero from the
	// start: a series that appears with its first increment is missed by
	// rate() and increase(), and a rule on it cannot be checked against a
	// fresh runner's /metrics (deploy/deploy_test.go).
	m.Claims.WithLabelValues("takeover")
	for _, op := range []string{"commit", "fail", "release", "heartbeat", "checkpoint", "park"} {
		m.StaleRejected.WithLabelValues(op)
	}
	for _, o := range []string{"retry", "failed", "cancelled"} {
		m.Failures.WithLabelValues(o)
	}
	for _, a := range []string{"expired_lease", "stale_ready"} {
		m.SweeperActions.WithLabelValues(a)
	}
	m.ScheduleSteps.WithLabelValues("created")
	if reg != nil {
		reg.MustRegister(m.Claims, m.Commits, m.StaleRejected, m.Takeovers, m.Failures, m.Releases,
			m.Running, m.SweeperActions, m.NodesUnserved, m.HeartbeatRTT, m.LeaseLeft, m.PoisonTasks,
			m.CommitsAlone)
		reg.MustRegister(m.ScheduleSteps)
	}
	return m
}

// claim counts a successful claim by outcome.
func (m *Metrics) claim(outcome string) {
	if outcome == "claimed" && m.claimed != nil {
		m.claimed.Inc()
		return
	}
	m.Claims.WithLabelValues(outcome).Inc()
}
