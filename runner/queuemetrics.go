package runner

import (
	"slices"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// queueCollector exports the depth and latency of the Asynq queues a runner
// serves, read from Redis when /metrics is scraped: no cost between
// scrapes, one Asynq stats script per queue at each.
type queueCollector struct {
	insp    *asynq.Inspector
	queues  []string
	tasks   *prometheus.Desc
	latency *prometheus.Desc
}

// NewQueueCollector returns a collector of baton_queue_tasks{queue,state}
// (pending, active, scheduled, retry, archived) and
// baton_queue_latency_seconds{queue} (how long the oldest pending task has
// waited) for queues. Every runner serving a queue reports the same values:
// aggregate with max, not sum. A queue Asynq has not seen yet reads as
// empty; one that cannot be read is left out of that scrape.
func NewQueueCollector(rdb redis.UniversalClient, queues []string) prometheus.Collector {
	return &queueCollector{
		insp:   asynq.NewInspectorFromRedisClient(rdb),
		queues: queues,
		tasks: prometheus.NewDesc("baton_queue_tasks",
			"Tasks in an Asynq queue this runner serves, by state: pending, active, scheduled, retry, archived (the same on every runner: aggregate with max).",
			[]string{"queue", "state"}, nil),
		latency: prometheus.NewDesc("baton_queue_latency_seconds",
			"How long the oldest pending task of the queue has waited (0: none pending).",
			[]string{"queue"}, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.latency
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	known, err := c.insp.Queues()
	if err != nil {
		return // Redis unreachable: /readyz says so
	}
	for _, q := range c.queues {
		info := &asynq.QueueInfo{} // a queue Asynq has not seen yet
		if slices.Contains(known, q) {
			if info, err = c.insp.GetQueueInfo(q); err != nil {
				continue
			}
		}
		for _, s := range []struct {
			state string
			n     int
		}{{"pending", info.Pending}, {"active", info.Active}, {"scheduled", info.Scheduled},
			{"retry", info.Retry}, {"archived", info.Archived}} {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.n), q, s.state)
		}
		ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, info.Latency.Seconds(), q)
	}
}
