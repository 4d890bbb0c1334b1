// Command embed shows a Go program that embeds baton's runtime: it runs a
// worker with the stock kinds and two kinds of its own, submits a small run
// with package client, waits for it (Client.Wait) and prints its results.
// Its approve node waits for a person (runner.Park): the program plays the
// person, prints the request and answers it with Client.Resume, as
// `enqueue resume` or the run view's form would. SIGINT or SIGTERM shuts
// the worker down gracefully: a running node reaches a safe point and is
// released, so another worker resumes it at once.
//
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/embed
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
	"github.com/batonrun/baton/spec"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, log)
	stop()
	if err != nil {
		log.Error("embed_failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	rdb, err := redisconn.OpenURL(cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"))
	if err != nil {
		return err
	}
	defer rdb.Close()

	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, Logger: log})
	if err != nil {
		return err
	}
	kinds.RegisterStock(w)
	w.Register("summarize", runner.KindFunc(summarize))
	w.Register("approve", runner.KindFunc(approve))
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Shutdown() // on a signal too: handlers see ErrShutdown and their nodes are released

	c, err := client.New(client.Config{Redis: rdb})
	if err != nil {
		return err
	}
	defer c.Close()
	sub, err := c.Submit(ctx, &spec.Run{Nodes: []spec.Node{
		{ID: "summarize", Kind: "summarize",
			Input: json.RawMessage(`{"text": "A worker that is only paused must never get a late write accepted after another worker took over."}`)},
		{ID: "approve", Kind: "approve", Deps: []string{"summarize"}},
		{ID: "announce", Kind: "exec", Deps: []string{"approve"},
			Input: json.RawMessage(`{"command": ["sh", "-c", "echo \"summary ready (token $BATON_FENCING_TOKEN)\""]}`)},
	}})
	if err != nil {
		return err
	}
	log.Info("submitted", "run_id", sub.RunID)

	// The program plays the person: it answers each wait as it comes,
	// while Wait blocks until the run ends (no polling: both follow the
	// run's events).
	go answerWaits(ctx, c, sub.RunID, log)
	info, err := c.Wait(ctx, sub.RunID)
	if ctx.Err() != nil {
		// A signal: the deferred Shutdown releases the running node, and
		// any worker on the same Redis resumes the run from there.
		log.Info("interrupted", "run_id", sub.RunID)
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range info.Nodes {
		fmt.Printf("%-10s %-9s %s\n", n.ID, n.State, n.Result)
	}
	if client.State(info.Status) != client.Succeeded {
		return fmt.Errorf("run %s %s", info.ID, info.Status)
	}
	return nil
}

// answerWaits approves every node of the run that parks, as a person would
// with `enqueue resume RUN NODE --value true` or the run view's form.
func answerWaits(ctx context.Context, c *client.Client, run string, log *slog.Logger) {
	f, err := c.Follow(ctx, run, "")
	if err != nil {
		log.Warn("follow_failed", "run_id", run, "err", err)
		return
	}
	for ctx.Err() == nil {
		evs, err := f.Next(ctx)
		if err != nil { // io.EOF: the run ended
			return
		}
		for _, e := range evs {
			if e.Type != "parked" {
				continue
			}
			fmt.Printf("%s asks %s: approving\n", e.Node, e.Details["request"])
			if _, err := c.Resume(ctx, run, e.Node, e.Details["wait_id"], json.RawMessage(`true`)); err != nil {
				log.Warn("resume_failed", "run_id", run, "node_id", e.Node, "err", err)
			}
		}
	}
}

// approve parks its node until a person answers; the attempt after the
// resume returns the answer. The node holds no lease and no worker slot
// while it waits, and survives a restart of every worker.
func approve(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	if v, ok := t.ResumeValue(); ok {
		return json.Marshal(map[string]json.RawMessage{"approved": v})
	}
	return nil, runner.Park(runner.Wait{Request: json.RawMessage(`{"ask": "publish the summary?"}`)})
}

// summarize is this program's own node kind. It works in steps, reports
// progress (stored within about 250 ms), stops at a safe point between
// steps when its context ends, and hands the lease's fencing token to its
// one side effect.
func summarize(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.Text == "" {
		return nil, runner.Permanent(errors.New(`summarize: input: want {"text": "..."}`)) // retrying cannot help
	}
	words := strings.Fields(in.Text)
	var keep []string
	for i, word := range words {
		select {
		case <-ctx.Done():
			// The cause says why: ErrShutdown (the node is released and
			// resumed elsewhere), ErrLeaseLost (another worker owns it now;
			// nothing this attempt writes will count) or ErrRunCancelled.
			// Return it wrapped so the runtime records the right outcome.
			return nil, fmt.Errorf("summarize: stopped after %d of %d words: %w", i, len(words), context.Cause(ctx))
		case <-time.After(50 * time.Millisecond): // one step of real work
		}
		if len(word) > 5 {
			keep = append(keep, strings.Trim(word, ".,"))
		}
		t.SetProgress(100 * (i + 1) / len(words))
	}
	summary := strings.Join(keep, " ")
	if err := publish(ctx, t.Token(), summary); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"summary": summary, "words": len(words)})
}

// publish is the side effect: it POSTs the summary to SUMMARY_URL, if set,
// with the fencing token, so that service can refuse a paused owner whose
// successor already wrote (fence.Token.Epoch older than the newest it saw).
func publish(ctx context.Context, tok fence.Token, summary string) error {
	url := os.Getenv("SUMMARY_URL")
	if url == "" {
		return nil
	}
	body, _ := json.Marshal(map[string]string{"summary": summary})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return runner.Permanent(fmt.Errorf("summarize: SUMMARY_URL: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(kinds.HeaderFencingToken, tok.String())
	req.Header.Set(kinds.HeaderEpoch, strconv.FormatInt(tok.Epoch, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("summarize: publish: %w", err) // retried while attempts remain
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		// 409 means a newer owner has published: this attempt is stale, and
		// whatever it records next is refused by Redis as well.
		return fmt.Errorf("summarize: publish: %s", resp.Status)
	}
	return nil
}
