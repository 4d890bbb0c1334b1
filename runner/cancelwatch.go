package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
)

// cancelWatcher brings a run's cancel to this worker at once. cancel.lua
// publishes a cancelled run on fence.Keys.CancelChannel in the same atomic
// step that sets the run's cancel flag, whoever cancels; the watcher, one
// per worker, cancels this worker's running attempts of that run with
// ErrRunCancelled (heartbeater.cancelRun). They then end CANCELLED through
// the fenced fail path, as before.
//
// Pub/Sub delivers at most once: a message published while the watcher is
// disconnected is lost, and the renewal's cancel flag (at the next
// heartbeat) is the fallback. go-redis's PubSub reconnects and subscribes
// again by itself after a network error or a Redis restart, and pings an
// idle connection every few seconds to notice one that died silently.
type cancelWatcher struct {
	rdb     redis.UniversalClient
	channel string
	hb      *heartbeater
	log     *slog.Logger
	timeout time.Duration

	wg       sync.WaitGroup
	mu       sync.Mutex
	ps       *redis.PubSub
	stopOnce sync.Once
}

// cancelWatcherParams builds a cancelWatcher.
type cancelWatcherParams struct {
	redis   redis.UniversalClient
	channel string // fence.Keys.CancelChannel
	hb      *heartbeater
	logger  *slog.Logger
	// subscribeTimeout bounds how long start waits for Redis to confirm
	// the subscription. Zero value: 5s.
	subscribeTimeout time.Duration
}

func newCancelWatcher(p cancelWatcherParams) *cancelWatcher {
	if p.subscribeTimeout <= 0 {
		p.subscribeTimeout = 5 * time.Second
	}
	return &cancelWatcher{rdb: p.redis, channel: p.channel, hb: p.hb, log: p.logger, timeout: p.subscribeTimeout}
}

// start subscribes and returns once Redis has confirmed the subscription,
// so that a cancel made after Start is pushed to this worker. When Redis
// does not confirm in time, start logs it and returns anyway: go-redis
// keeps trying, and heartbeats carry cancels meanwhile. The watcher stops
// when ctx ends or stop is called.
func (c *cancelWatcher) start(ctx context.Context) {
	ps := c.rdb.Subscribe(ctx, c.channel)
	c.mu.Lock()
	c.ps = ps
	c.mu.Unlock()
	msgs := ps.ChannelWithSubscriptions()
	subscribed := make(chan struct{}) // closed at the first confirmed subscription
	done := make(chan struct{})       // closed when receive returns
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
			c.stop()
		case <-done: // stopped by stop alone
		}
	}()
	go func() {
		defer c.wg.Done()
		defer close(done)
		c.receive(msgs, subscribed)
	}()
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case <-subscribed:
	case <-done:
	case <-ctx.Done():
	case <-t.C:
		c.log.Warn("cancel_push_unavailable", "channel", c.channel,
			"reason", "no subscription confirmed; cancels arrive with heartbeats until it is")
	}
}

// receive handles messages until the PubSub is closed. It closes ready at
// the first confirmed subscription.
func (c *cancelWatcher) receive(msgs <-chan any, ready chan struct{}) {
	subs := 0
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			subs++
			if subs == 1 {
				close(ready)
				c.log.Debug("cancel_push_subscribed", "channel", c.channel)
			} else {
				// A reconnect (network error, Redis restart): cancels
				// published while disconnected came with heartbeats.
				c.log.Info("cancel_push_resubscribed", "channel", c.channel)
			}
		case *redis.Message:
			msg, err := fence.ParseCancelMessage(m.Payload)
			if err != nil {
				c.log.Warn("cancel_push_malformed", "payload", m.Payload, "err", err)
				continue
			}
			if n := c.hb.cancelRun(msg); n > 0 {
				c.log.Info("run_cancel_pushed", "run_id", msg.Run, "attempts", n)
			}
		}
	}
}

// stop closes the subscription; receive then returns. Idempotent.
func (c *cancelWatcher) stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		ps := c.ps
		c.mu.Unlock()
		if ps != nil {
			_ = ps.Close()
		}
	})
}

// wait returns once the watcher has stopped.
func (c *cancelWatcher) wait() { c.wg.Wait() }
