// Command downstream is a fenced side-effect service: the target of the
// deploy example's http nodes (POST /migrate, POST /notify). It admits each
// request's Baton-Fencing-Token with fence.GuardHTTP before acting, so a
// worker that was paused past its lease and wakes up with an older token is
// refused (409) instead of migrating twice.
//
//	REDIS_URL=redis://127.0.0.1:6379/0 ADDR=127.0.0.1:8089 go run ./examples/downstream
//
// With ADMIT_LOG set, every admit decision is appended to that file as one
// JSON line, so that the fault harness (cmd/chaos) can check afterwards that
// no older token was admitted after a newer one.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rdb, err := runner.OpenRedis(cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"))
	if err != nil {
		log.Error("redis", "err", err)
		os.Exit(2)
	}
	var guard fence.Admitter = fence.NewGuard(rdb, nil)
	if path := os.Getenv("ADMIT_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			log.Error("admit_log", "err", err)
			os.Exit(2)
		}
		defer f.Close()
		guard = &loggedAdmitter{next: guard, w: f, log: log}
	}

	mux := http.NewServeMux()
	for _, path := range []string{"/migrate", "/notify"} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			tok, _ := fence.TokenFrom(r.Context())
			var body any
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
				http.Error(w, `{"error":"body is not JSON"}`, http.StatusBadRequest)
				return
			}
			// The side effect would happen here, after the token was admitted.
			log.Info("side_effect", "path", path, "token", tok.String())
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"done": path, "epoch": tok.Epoch, "request": body})
		})
	}
	addr := cmp.Or(os.Getenv("ADDR"), "127.0.0.1:8089")
	log.Info("listening", "addr", addr)
	if err := http.ListenAndServe(addr, fence.GuardHTTP(guard, mux, nil)); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}

// loggedAdmitter records every decision of the Admitter it wraps, one JSON
// line each. The token's parts come from the parsed fence.Token, never from
// the header: the token format is fence's to change.
type loggedAdmitter struct {
	next fence.Admitter
	log  *slog.Logger
	mu   sync.Mutex // one line per Write, lines never interleaved
	w    *os.File
}

// admitRecord is one line of ADMIT_LOG. Start and At (UnixNano) bracket the
// decision, so a reader can tell decisions that overlapped from ordered ones.
type admitRecord struct {
	Token    string `json:"token"`
	Resource string `json:"resource"`
	Run      string `json:"run"`
	Node     string `json:"node"`
	Epoch    int64  `json:"epoch"`
	Claim    string `json:"claim"`
	Admitted bool   `json:"admitted"`
	Start    int64  `json:"start"`
	At       int64  `json:"at"`
	Err      string `json:"err,omitempty"`
}

func (a *loggedAdmitter) Admit(ctx context.Context, tok fence.Token) error {
	start := time.Now().UnixNano()
	err := a.next.Admit(ctx, tok)
	rec := admitRecord{Token: tok.String(), Resource: tok.Resource(), Run: tok.Run, Node: tok.Node,
		Epoch: tok.Epoch, Claim: tok.ClaimID, Admitted: err == nil, Start: start, At: time.Now().UnixNano()}
	if err != nil {
		rec.Err = err.Error()
		if !errors.Is(err, fence.ErrStaleEpoch) && !errors.Is(err, fence.ErrNotOwner) {
			rec.Err = "undecided: " + rec.Err
		}
	}
	line, _ := json.Marshal(rec) // strings and integers only
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, werr := a.w.Write(append(line, '\n')); werr != nil {
		a.log.Error("admit_log", "err", werr)
	}
	return err
}
