package runner

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonrun/baton/fence"
)

// limitScrapeTimeout bounds the Redis reads of one scrape of the limits.
const limitScrapeTimeout = 5 * time.Second

// limitCollector exports the fleet-wide limits (docs/flow-control.md) and
// their use, read from Redis when /metrics is scraped: nothing between
// scrapes and nothing on the claim path; at each scrape the reads of
// fence.Store.LimitStates (the definitions, the index of keys seen when a
// prefix rule is set, then one pipeline over the keys, at most 200 per
// rule).
type limitCollector struct {
	store                                   *fence.Store
	concurrency, rate, burst                *prometheus.Desc
	inUse, waiting, tokens, keys, readError *prometheus.Desc
}

// NewLimitCollector returns a collector of one series per limit set,
// labelled limit="NAME" (the name it was set under: "openai", or
// "tenant:*" for a prefix rule), so that the labels grow with the limits
// an operator sets, never with the keys nodes name:
//
//   - baton_limit_concurrency, baton_limit_rate_per_second and
//     baton_limit_burst: the limit as set (per key for a prefix rule);
//     only those it sets;
//   - baton_limit_in_use: concurrency slots held (or handed to a woken
//     waiter), baton_limit_waiting: nodes waiting READY for a slot, both
//     summed over a prefix rule's keys;
//   - baton_limit_tokens_left: claims of cost 1 its rate allows now (up to
//     burst+1), for a prefix rule the fewest any of its keys has;
//   - baton_limit_keys: the keys counted (1 for a plain limit; for a rule
//     the keys claimed under it lately, at most 200, the most recent).
//
// Every runner reports the same values: aggregate with max, not sum.
func NewLimitCollector(store *fence.Store) prometheus.Collector {
	l := []string{"limit"}
	return &limitCollector{
		store: store,
		concurrency: prometheus.NewDesc("baton_limit_concurrency",
			"Concurrency set for a limit: nodes that may run at once under one key (per key for a prefix rule such as tenant:*).", l, nil),
		rate: prometheus.NewDesc("baton_limit_rate_per_second",
			"Rate set for a limit, in claims (units of cost) per second, per key for a prefix rule.", l, nil),
		burst: prometheus.NewDesc("baton_limit_burst",
			"Burst set for a limit's rate: claims allowed at once beyond the rate.", l, nil),
		inUse: prometheus.NewDesc("baton_limit_in_use",
			"Concurrency slots of a limit held by claims (or handed to a woken waiter), summed over a prefix rule's keys (the same on every runner: aggregate with max).", l, nil),
		waiting: prometheus.NewDesc("baton_limit_waiting",
			"Nodes waiting READY for a concurrency slot of a limit, summed over a prefix rule's keys.", l, nil),
		tokens: prometheus.NewDesc("baton_limit_tokens_left",
			"Claims of cost 1 a limit's rate allows now (up to burst+1); for a prefix rule, the fewest any of its keys has.", l, nil),
		keys: prometheus.NewDesc("baton_limit_keys",
			"Keys a limit's figures cover: 1, or for a prefix rule the keys claimed under it lately (at most 200, the most recent).", l, nil),
		readError: prometheus.NewDesc("baton_limits_unreadable",
			"1 when this scrape could not read the limits from Redis (their series are then missing), else 0.", nil, nil),
	}
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.concurrency, c.rate, c.burst, c.inUse, c.waiting, c.tokens, c.keys, c.readError} {
		ch <- d
	}
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), limitScrapeTimeout)
	defer cancel()
	states, err := c.store.LimitStates(ctx)
	failed := 0.0
	if err != nil {
		failed = 1 // /readyz says whether Redis is reachable at all
	}
	ch <- prometheus.MustNewConstMetric(c.readError, prometheus.GaugeValue, failed)
	gauge := func(d *prometheus.Desc, v float64, name string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
	}
	for _, s := range states {
		t := s.Total()
		gauge(c.waiting, float64(t.Waiting), s.Name)
		gauge(c.keys, float64(len(s.Keys)), s.Name)
		if s.Concurrency > 0 {
			gauge(c.concurrency, float64(s.Concurrency), s.Name)
			gauge(c.inUse, float64(t.InUse), s.Name)
		}
		if t.Tokens != nil {
			gauge(c.rate, float64(s.Rate)/s.Period.Seconds(), s.Name)
			gauge(c.burst, float64(s.Burst), s.Name)
			gauge(c.tokens, float64(*t.Tokens), s.Name)
		}
	}
}
