// Command downstream is a fenced side-effect service: the target of the
// deploy example's http nodes (POST /migrate, POST /notify). It admits each
// request's Baton-Fencing-Token with fence.GuardHTTP before acting, so a
// worker that was paused past its lease and wakes up with an older token is
// refused (409) instead of migrating twice.
//
//	REDIS_URL=redis://127.0.0.1:6379/0 ADDR=127.0.0.1:8089 go run ./examples/downstream
package main

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"

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
	guard := fence.NewGuard(rdb, nil)

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
