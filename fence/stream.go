package fence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A run's stream holds what its attempts stream while they run: LangGraph's
// stream modes (values, updates, messages, custom, tasks, checkpoints,
// debug, events) or anything a Go kind sends. It is a Redis stream of its
// own beside the run's events (Keys.Stream), in the run's slot: a reader
// of chunks is not handed baton's node events, and a flood of tokens never
// trims those. Every append is fenced (scripts/lua/stream_append.lua), so
// a reader never sees a chunk from an attempt that lost its claim.

// Stream defaults (Options).
const (
	// DefaultStreamMaxLen caps a run's stream, in entries (approximate:
	// Redis trims whole macro nodes of 100 entries).
	DefaultStreamMaxLen = 10000
	// DefaultStreamChunkBytes caps one chunk's event and data together.
	DefaultStreamChunkBytes = 1 << 20
	// MaxStreamEventLen caps a chunk's event name (a stream mode, with a
	// subgraph's namespace after "|" as LangGraph sends it).
	MaxStreamEventLen = 256
)

// ErrStreamSeq: a batch's seq is below its claim's next one and is not a
// retry of the claim's last batch. That batch is stored or lost for good;
// number the next one from the claim's next seq.
var ErrStreamSeq = errors.New("fence: stream seq out of order")

// MetadataEvent is the event of the entry that marks where an attempt
// starts in its run's stream; its data is {"run_id": ..., "attempt": ...}.
const MetadataEvent = "metadata"

// StreamChunk is one chunk an attempt streams: Event is the stream mode
// ("values", "updates", "messages", "custom", ...), Data its JSON.
type StreamChunk struct {
	Event string
	Data  json.RawMessage
}

// StreamEntry is one entry of a run's stream as a reader gets it.
type StreamEntry struct {
	// ID is the Redis stream id: readers resume after it.
	ID    string          `json:"id"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
	// Node and Attempt say which attempt wrote the entry.
	Node    string `json:"node"`
	Attempt int64  `json:"attempt"`
}

// Stream is the run's stream of chunks (stream_append.lua).
func (k Keys) Stream(thread, run string) string { return k.tagged(thread, "stream", run) }

// StreamState is the run's hash of each claim's last appended batch
// (claim id -> "next|seq|ids"), which answers a retried batch.
func (k Keys) StreamState(thread, run string) string { return k.tagged(thread, "streamseq", run) }

// streamKeys are the keys retention and delete give a run's stream.
func (s *Store) streamKeys(thread, run string) []string {
	return []string{s.keys.Stream(thread, run), s.keys.StreamState(thread, run)}
}

// checkStreamEvent accepts an event name that fits on an SSE "event:" line.
func checkStreamEvent(ev string) error {
	if ev == "" || len(ev) > MaxStreamEventLen {
		return fmt.Errorf("event %q: %w: want 1 to %d bytes", ev, ErrInvalidData, MaxStreamEventLen)
	}
	for i := 0; i < len(ev); i++ {
		if c := ev[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("event %q: %w: byte %d is not printable ASCII", ev, ErrInvalidData, i)
		}
	}
	return nil
}

// AppendStream appends chunks to l's run's stream, if and only if l is
// the current claim of a RUNNING node of the same run incarnation, and
// returns each chunk's stream id.
//
// seq numbers the batch's first chunk within the claim, from 0; the next
// batch starts at seq+len(chunks) or later. A call again with the same seq
// and as many chunks (a retry after a lost reply) returns the ids of the
// first time and appends nothing, even once the node was taken over; an
// older seq is refused with ErrStreamSeq. Call it from one goroutine per
// claim, or number the batches in the order they are sent.
//
// The claim's first batch is preceded by an entry of event MetadataEvent
// marking the attempt's start. A refusal appends nothing, is recorded as
// stale_rejected (op=stream) and matches IsFenced (ErrStaleEpoch,
// ErrNotOwner, ErrNotRunning): the attempt must stop. A chunk whose event
// and data are larger than Options.MaxStreamChunkBytes is refused with
// ErrTooLarge, data that is not JSON with ErrInvalidData; nothing is
// appended. Data is stored compacted to one line.
func (s *Store) AppendStream(ctx context.Context, l Lease, seq int64, chunks []StreamChunk) ([]string, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	if seq < 0 {
		return nil, fmt.Errorf("stream %s: seq %d: %w", l, seq, ErrStreamSeq)
	}
	args := make([]any, 0, 11+2*len(chunks))
	args = append(args, l.Node, l.Run, l.Owner, l.Epoch, l.ClaimID, l.Incarnation, l.Attempt, seq,
		s.streamMaxLen, s.streamChunkBytes, s.maxlen)
	var buf bytes.Buffer
	for i, c := range chunks {
		if err := checkStreamEvent(c.Event); err != nil {
			return nil, fmt.Errorf("stream %s: chunk %d: %w", l, i, err)
		}
		data := "null"
		if len(c.Data) > 0 {
			buf.Reset()
			if err := json.Compact(&buf, c.Data); err != nil {
				return nil, fmt.Errorf("stream %s: chunk %d (%s): data is not JSON: %w", l, i, c.Event, ErrInvalidData)
			}
			data = buf.String()
		}
		if n := len(c.Event) + len(data); n > s.streamChunkBytes {
			return nil, fmt.Errorf("stream %s: chunk %d (%s): %d bytes, at most %d: %w", l, i, c.Event, n, s.streamChunkBytes, ErrTooLarge)
		}
		args = append(args, c.Event, data)
	}
	keys := append([]string{s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Events(l.Thread, l.Run)},
		append(s.streamKeys(l.Thread, l.Run), s.keys.Packed(l.Thread, l.Run))...)
	v, err := s.run(ctx, "stream_append", keys, args...)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", l, err)
	}
	code, r, err := reply(v)
	switch {
	case code == -15 && len(r) == 2:
		return nil, fmt.Errorf("stream %s: chunk %d: %d bytes, at most %d: %w", l, asInt(r[0])-1, asInt(r[1]), s.streamChunkBytes, err)
	case code == -17 && len(r) == 1:
		return nil, fmt.Errorf("stream %s: seq %d, the claim's next is %d: %w", l, seq, asInt(r[0]), err)
	case err != nil:
		return nil, fmt.Errorf("stream %s: %w", l, err)
	}
	return asStrings(r), nil
}

// streamIDPattern matches a Redis stream id ("1700000000000-0"), or its
// millisecond part alone.
var streamIDPattern = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// ValidStreamID reports whether after can resume a read of a stream: a
// stream id, or "", "0" or "-1" for the start.
func ValidStreamID(after string) bool {
	return after == "" || after == "-1" || streamIDPattern.MatchString(after)
}

// ReadStream returns up to count entries of run's stream after the stream
// id after ("", "0" or "-1": from the start), waiting up to block for the
// first one when there is none yet (XREAD BLOCK); block <= 0 does not
// wait. It returns no entries and no error when block passed without one.
// An unknown run is ErrNotFound.
//
// A blocking read holds one of the client's pooled connections for up to
// block, whatever ctx does: go-redis does not interrupt a blocking read
// when its context is cancelled. Serve many readers of one run from one
// read (runner/admin does).
func (s *Store) ReadStream(ctx context.Context, run, after string, count int64, block time.Duration) ([]StreamEntry, error) {
	if !ValidStreamID(after) {
		return nil, fmt.Errorf("stream %s: after %q: %w: want a stream id such as 1700000000000-0", run, after, ErrInvalidID)
	}
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return nil, err
	}
	return s.ReadStreamOf(ctx, thread, run, after, count, block)
}

// ReadStreamOf is ReadStream for a caller that knows the run's thread.
func (s *Store) ReadStreamOf(ctx context.Context, thread, run, after string, count int64, block time.Duration) ([]StreamEntry, error) {
	if after == "" || after == "-1" {
		after = "0"
	}
	a := &redis.XReadArgs{Streams: []string{s.keys.Stream(thread, run)}, ID: after, Count: count, Block: -1}
	if block > 0 {
		if dl, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(dl))
		}
		a.Block = max(block, time.Millisecond) // BLOCK 0 would wait forever
	}
	streams, err := s.rdb.XRead(ctx, a).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stream %s: %w", run, err)
	case len(streams) == 0:
		return nil, nil
	}
	return streamEntries(streams[0].Messages), nil
}

func streamEntries(msgs []redis.XMessage) []StreamEntry {
	out := make([]StreamEntry, 0, len(msgs))
	for _, m := range msgs {
		e := StreamEntry{ID: m.ID, Event: asString(m.Values["event"]), Node: asString(m.Values["node"]),
			Attempt: asInt(m.Values["attempt"])}
		if d := asString(m.Values["data"]); d != "" {
			e.Data = json.RawMessage(d)
		}
		out = append(out, e)
	}
	return out
}

// CompareStreamIDs orders two stream ids as Redis does: -1, 0 or 1.
func CompareStreamIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	for _, p := range [][2]string{{am, bm}, {as, bs}} {
		x, _ := strconv.ParseUint(p[0], 10, 64)
		y, _ := strconv.ParseUint(p[1], 10, 64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}
