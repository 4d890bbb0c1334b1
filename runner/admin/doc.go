// Package admin is the runner's HTTP face: probes, Prometheus metrics, the
// Asynq web UI and a JSON API to submit, inspect and cancel runs. It is a
// library so that a program embedding a Worker serves the same routes as the
// stock binary (cmd/runner) does.
//
// # Routes
//
//	GET  /healthz                 200 "ok": the process serves HTTP (open)
//	GET  /readyz                  200 "ok" when Redis answers PING, else 503 (open)
//	GET  /metrics                 Prometheus exposition of Config.Gatherer (open)
//	     /monitor/                asynqmon: queues, tasks, servers; JSON under /monitor/api/
//	GET  /, /runs?status=&thread=&from=
//	                              the run view's list (HTML), newest first, 50 a page
//	GET  /runs/{id}               the run's DAG (SVG) and event timeline; polls
//	                              /runs/{id}/live while the run is active; a node's
//	                              details come from /runs/{id}/nodes/{node}
//	POST /runs/{id}/cancel        the run view's cancel button (a form post)
//	GET  /workers                 the fleet view: runners, their leases' health
//	GET  /login, POST /login, POST /logout
//	                              with a token only: a browser's session (session.go)
//	POST /v1/runs                 submit a run spec (JSON or YAML body)
//	GET  /v1/runs?status=&limit=  runs, newest first
//	GET  /v1/runs/{id}            the run with its nodes (fence.RunInfo)
//	GET  /v1/runs/{id}/events?after=&limit=
//	                              {"events": [...], "next": "<id>"}; pass next as
//	                              after to read on
//	GET  /v1/runs/{id}/events?follow=1
//	                              the events live as Server-Sent Events, resumable
//	                              with Last-Event-ID, ending with "event: end"
//	                              (follow.go)
//	POST /v1/runs/{id}/cancel     body optional: {"reason": "..."}
//
// Every /v1 error is JSON, {"error": "..."}, and a bad run spec adds
// "problems": [{"field", "message"}, ...] naming each wrong field. Status
// codes: 400 bad input, 401 missing or wrong token, 403 a request a browser
// was tricked into sending, 404 unknown run, 405 wrong method, 409 conflict
// (another spec under the same run id; cancelling a finished run), 413 body
// over Config.MaxBodyBytes, 503 Redis unreachable.
//
// # Who may call
//
// The API can start commands (the exec kind), so it is guarded twice
// (guard.go; docs/security.md has the whole trust model):
//
//   - With Config.Token set, /v1/, /monitor/ and the views require
//     "Authorization: Bearer <token>", compared in constant time, or a
//     session cookie that /login issued for that token. Wrong tokens are
//     throttled per client and logged at a rate (throttle.go). The probes,
//     /metrics and the views' stylesheet and script stay open so that
//     orchestrators and Prometheus need no secret.
//   - Without a token the API, the UI and /metrics answer only callers on
//     this machine: the connection's peer is loopback (or a Unix socket),
//     the Host is a loopback name or address (localhost, 127.0.0.0/8,
//     ::1), and no proxy's forwarding header is present. A remote client
//     sending "Host: localhost" is refused; so is a web page that points
//     its own domain at 127.0.0.1 (DNS rebinding).
//
// Either way, state-changing requests that a browser marks as cross-origin
// are refused (net/http's CrossOriginProtection), so a page the operator
// visits cannot submit or cancel runs through the operator's browser.
// Every answer forbids framing and form posts to another origin, and
// baton's pages take HTML only from the server (headers.go).
package admin
