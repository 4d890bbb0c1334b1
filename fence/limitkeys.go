package fence

import "github.com/batonrun/baton/fence/ids"

// Keys of limits (fence/limits.go). A limit's state lives under a hash tag
// of its own key, "{lim/KEY}", so the state of one limit key shares a
// Redis Cluster slot; the definitions are one hash.

// LimitDefs is the hash of limit definitions: name ("openai",
// "tenant:*") -> "concurrency,rate,period_ms,burst".
func (k Keys) LimitDefs() string { return k.prefix() + ":limits" }

// LimitSeen indexes the limit keys nodes have claimed under (key -> ms of
// the last claim), for the fleet view and the metrics. A listing aid.
func (k Keys) LimitSeen() string { return k.prefix() + ":limits:seen" }

// LimitHolders is a limit key's concurrency slots: node ref -> the claim
// id holding it, or "r:DEADLINE_MS|QUEUE" for a slot handed to a woken
// waiter that has until then to claim it.
func (k Keys) LimitHolders(key string) string { return k.prefix() + ":{lim/" + key + "}:h" }

// LimitWaiters is a limit key's waiting nodes, first come first served:
// "ref|queue" -> ms when it began to wait.
func (k Keys) LimitWaiters(key string) string { return k.prefix() + ":{lim/" + key + "}:w" }

// LimitTAT is a limit key's rate state (GCRA's theoretical arrival time,
// ms on Redis's clock).
func (k Keys) LimitTAT(key string) string { return k.prefix() + ":{lim/" + key + "}:t" }

// ValidateLimitName reports whether name may be set as a limit (a key such
// as "openai" or "tenant:acme", or a prefix rule "tenant:*").
func ValidateLimitName(field, name string) error { return ids.ValidateLimitName(field, name) }
