package spec

import (
	"encoding/json"
	"math/rand/v2"
	"time"
)

// RetryPolicy is a node's backoff between failed attempts (spec field
// "retry"). Every field is optional; an unset one takes today's default,
// the worker's: exponential from runner.WorkerConfig.RetryBase (1s) up to
// RetryMax (5m), with jitter.
//
//	{"backoff": "fixed", "base": "2s", "jitter": false}
type RetryPolicy struct {
	// Backoff is "exponential" (base, 2×base, 4×base, ... up to max) or
	// "fixed" (base every time). Empty: exponential.
	Backoff string `json:"backoff,omitempty" yaml:"backoff,omitempty"`
	// Base is the first delay ("1s"); zero: the worker's RetryBase.
	Base Duration `json:"base,omitempty" yaml:"base,omitempty"`
	// Max caps the delay ("5m"); zero: the worker's RetryMax, or Base
	// when that is larger.
	Max Duration `json:"max,omitempty" yaml:"max,omitempty"`
	// Jitter draws each delay uniformly from [d/2, d], so a fleet does not
	// retry in step. Nil: true.
	Jitter *bool `json:"jitter,omitempty" yaml:"jitter,omitempty"`
}

// storedRetry is RetryPolicy as the node hash keeps it (field "retry"),
// in milliseconds; the worker reads it when an attempt fails.
type storedRetry struct {
	Backoff string `json:"backoff,omitempty"`
	BaseMS  int64  `json:"base_ms,omitempty"`
	MaxMS   int64  `json:"max_ms,omitempty"`
	Jitter  *bool  `json:"jitter,omitempty"`
}

// encode is the policy as stored; "" for none, so a spec without one keeps
// its digest.
func (p *RetryPolicy) encode() string {
	if p == nil {
		return ""
	}
	b, _ := json.Marshal(storedRetry{Backoff: p.Backoff, BaseMS: time.Duration(p.Base).Milliseconds(),
		MaxMS: time.Duration(p.Max).Milliseconds(), Jitter: p.Jitter}) // cannot fail
	return string(b)
}

// RetryDelay is the delay before a node's next attempt after used failed
// attempts (1 after the first), under its stored policy (CompiledNode.Retry;
// "" or one that does not parse: the defaults) and the worker's defaults.
// It lives with the policy so that what a spec says and what a worker does
// are read in one place.
func RetryDelay(stored string, used int64, base, maxDelay time.Duration) time.Duration {
	var p storedRetry
	if stored != "" {
		_ = json.Unmarshal([]byte(stored), &p) // written by compile; a bad one means the defaults
	}
	if p.BaseMS > 0 {
		base = time.Duration(p.BaseMS) * time.Millisecond
	}
	if p.MaxMS > 0 {
		maxDelay = time.Duration(p.MaxMS) * time.Millisecond
	} else {
		maxDelay = max(maxDelay, base) // a base set above the worker's cap is meant
	}
	d := base
	if p.Backoff != "fixed" {
		d = base << min(max(used-1, 0), 20)
	}
	if d <= 0 || d > maxDelay {
		d = maxDelay
	}
	if p.Jitter != nil && !*p.Jitter {
		return d
	}
	return d/2 + rand.N(d/2+1) // jitter keeps a fleet from retrying in step
}
