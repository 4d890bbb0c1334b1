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
// The API can start commands (the exec kind), so it is guarded twice:
//
//   - With Config.Token set, /v1/ and /monitor/ require
//     "Authorization: Bearer <token>", compared in constant time. The probes
//     and /metrics stay open so that orchestrators and Prometheus need no
//     secret.
//   - Without a token the API and the UI answer only requests whose Host is
//     a loopback name or address (localhost, 127.0.0.0/8, ::1). A web page
//     that points its own domain at 127.0.0.1 (DNS rebinding) is refused.
//
// Either way, state-changing requests that a browser marks as cross-origin
// are refused (net/http's CrossOriginProtection), so a page the operator
// visits cannot submit or cancel runs through the operator's browser.
package admin
