package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// feed is a run's live event stream: Next blocks until events come (or a
// wait passes: no events, no error) and returns io.EOF once the run has
// ended and every event up to its end was returned; Status then says how
// it ended. client.EventFollower reads Redis directly; sseFeed reads an
// admin server's GET /v1/runs/{id}/events?follow=1.
type feed interface {
	Next(ctx context.Context) ([]fence.Event, error)
	Status() string
}

// source is where the live commands read a run: Redis (through a
// client.Client) or an admin server's API (--api).
type source interface {
	follow(ctx context.Context, run string, wait time.Duration) (feed, error)
	status(ctx context.Context, run string) (*fence.RunInfo, error)
	close()
}

// openSource connects to the admin server at api when given, otherwise
// to Redis.
func (a *app) openSource(ctx context.Context, api string) (source, error) {
	if api != "" {
		u, err := url.Parse(api)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, badInput(fmt.Errorf("--api %q: want the admin server's URL, e.g. http://127.0.0.1:8080", api))
		}
		return &apiSource{base: strings.TrimSuffix(u.String(), "/"), token: a.cfg.APIToken,
			http: &http.Client{}}, nil
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	return redisSource{cl: cl, done: done}, nil
}

type redisSource struct {
	cl   *client.Client
	done func()
}

func (s redisSource) follow(ctx context.Context, run string, wait time.Duration) (feed, error) {
	f, err := s.cl.Follow(ctx, run, "")
	if err != nil {
		return nil, err
	}
	f.Wait = wait
	return f, nil
}

func (s redisSource) status(ctx context.Context, run string) (*fence.RunInfo, error) {
	return s.cl.Status(ctx, run)
}

func (s redisSource) close() { s.done() }

// apiSource reads runs through the admin server's HTTP API, with the
// API_TOKEN of the environment as bearer token.
type apiSource struct {
	base, token string
	http        *http.Client
}

func (s *apiSource) close() {}

func (s *apiSource) get(ctx context.Context, path string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+path, nil)
	if err != nil {
		return nil, err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &body) != nil || body.Error == "" {
		body.Error = strings.TrimSpace(string(raw))
	}
	err = fmt.Errorf("%s: %s: %s", path, resp.Status, body.Error)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w (%s)", fence.ErrNotFound, err)
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		return nil, badInput(err)
	}
	return nil, err
}

func (s *apiSource) status(ctx context.Context, run string) (*fence.RunInfo, error) {
	resp, err := s.get(ctx, "/v1/runs/"+run, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info fence.RunInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	return &info, nil
}

func (s *apiSource) follow(ctx context.Context, run string, wait time.Duration) (feed, error) {
	f := &sseFeed{src: s, run: run, wait: wait}
	if err := f.open(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// sseFeed reads an admin server's event stream. A broken stream is opened
// again with Last-Event-ID: nothing is lost or repeated.
type sseFeed struct {
	src    *apiSource
	run    string
	wait   time.Duration // Next returns nothing after this long without an event
	last   string
	status string
	// name and data of the message being read, kept across calls to Next
	name, data string
	body       io.ReadCloser
	lines      chan sseLine
}

// sseLine is one line of the stream, or the error that ended it.
type sseLine struct {
	text string
	err  error
}

func (f *sseFeed) Status() string { return f.status }

func (f *sseFeed) open(ctx context.Context) error {
	hdr := map[string]string{"Accept": "text/event-stream"}
	if f.last != "" {
		hdr["Last-Event-ID"] = f.last
	}
	resp, err := f.src.get(ctx, "/v1/runs/"+f.run+"/events?follow=1", hdr)
	if err != nil {
		return err
	}
	f.body = resp.Body
	f.lines = make(chan sseLine)
	go func(body io.Reader, out chan<- sseLine) {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			out <- sseLine{text: sc.Text()}
		}
		err := sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF // the server closed without "end"
		}
		out <- sseLine{err: err}
		close(out)
	}(resp.Body, f.lines)
	return nil
}

// Next returns the events of one dispatched message, or nothing after a
// keep-alive comment.
func (f *sseFeed) Next(ctx context.Context) ([]fence.Event, error) {
	if f.body == nil {
		if err := f.open(ctx); err != nil {
			return nil, err
		}
	}
	timer := time.NewTimer(f.wait)
	defer timer.Stop()
	for {
		var l sseLine
		select {
		case <-ctx.Done():
			f.body.Close()
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil // a message half read is finished next time
		case l = <-f.lines:
		}
		switch {
		case l.err != nil:
			f.body.Close()
			f.body, f.name, f.data = nil, "", "" // open again, after the last event seen
			return nil, fmt.Errorf("event stream: %w", l.err)
		case strings.HasPrefix(l.text, ":"):
			return nil, nil // keep-alive
		case l.text == "":
			if f.data == "" {
				continue
			}
			name, data := f.name, f.data
			f.name, f.data = "", ""
			return f.dispatch(name, data)
		}
		k, v, _ := strings.Cut(l.text, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "event":
			f.name = v
		case "data":
			f.data = v
		}
	}
}

func (f *sseFeed) dispatch(name, data string) ([]fence.Event, error) {
	switch name {
	case "end":
		var end struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal([]byte(data), &end)
		f.status = end.Status
		f.body.Close()
		return nil, io.EOF
	case "error":
		f.body.Close()
		f.body = nil
		return nil, fmt.Errorf("event stream: server: %s", data)
	}
	var e fence.Event
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return nil, fmt.Errorf("event stream: %w", err)
	}
	f.last = e.ID
	return []fence.Event{e}, nil
}

// errEnded reports whether err is a feed's end.
func errEnded(err error) bool { return errors.Is(err, io.EOF) }
