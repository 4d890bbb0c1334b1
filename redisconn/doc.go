// Package redisconn opens the Redis connection every baton binary uses:
// one server by URL (redis://, rediss:// for TLS, user:password for AUTH),
// a Redis Cluster, or a primary with replicas behind Sentinel, from the
// same environment variables (REDIS_URL, REDIS_CLUSTER_ADDRS, ...).
//
// It is its own package so that the runner and the enqueue CLI read one
// configuration and open one kind of pool, while enqueue links none of the
// worker runtime. It knows go-redis only: nothing of baton's keys (package
// fence) or queue (Asynq). Errors name the URL with its password redacted.
package redisconn
