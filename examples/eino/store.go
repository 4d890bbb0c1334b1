package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/compose"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// ErrNoTask: Get or Set was called with a context that carries no baton
// task (WithTask), so there is no thread to read and no lease to write
// under.
var ErrNoTask = errors.New("eino store: context carries no baton task")

// NSPrefix starts the baton namespace of every Eino checkpoint id.
const NSPrefix = "eino:"

// b64 marks an Eino checkpoint id that is not a baton id, kept base64url
// encoded. A baton id never holds ':', so no plain id can look like it.
const b64 = "b64:"

// CheckPointStore is an Eino compose.CheckPointStore kept in baton's
// fenced checkpoint store. It holds no state: Get and Set act for the baton
// task their context carries (WithTask; Eino hands Invoke's context on to
// the store), through the task's own checkpoint methods. So one store, and
// one compiled graph, serve every attempt on a worker.
//
// Set saves only while the task's lease is the node's current claim. A
// worker whose node was taken over gets an error matching fence.IsFenced,
// the graph's Invoke returns it, nothing is stored, the refusal is a
// stale_rejected event (op=checkpoint), and the runtime ends the attempt
// as it does for a refused heartbeat. Get reads the newest checkpoint saved
// under the id in the task's thread, whichever worker saved it; reading is
// not fenced.
//
// Each Eino checkpoint id is a baton namespace of its own (Namespace), and
// each Set a new version in it: Eino writes the same id again at every
// interrupt, while a baton checkpoint id saved twice by one claim counts as
// a retry and keeps the first data.
type CheckPointStore struct{}

var _ compose.CheckPointStore = CheckPointStore{}

type taskKey struct{}

// WithTask returns ctx carrying t, for the CheckPointStore calls Eino makes
// with it. A kind calls it on its context before Invoke.
func WithTask(ctx context.Context, t *runner.Task) context.Context {
	return context.WithValue(ctx, taskKey{}, t)
}

func taskFrom(ctx context.Context, checkPointID string) (*runner.Task, string, error) {
	t, ok := ctx.Value(taskKey{}).(*runner.Task)
	if !ok || t == nil {
		return nil, "", fmt.Errorf("eino checkpoint %q: %w", checkPointID, ErrNoTask)
	}
	ns, err := Namespace(checkPointID)
	return t, ns, err
}

// meta is what a saved checkpoint's metadata records: the Eino id it
// belongs to and how its data is kept ("json": Eino's bytes as they are,
// which is what Eino's default serializer writes; "base64": a JSON string
// holding them, for a serializer that writes something else).
type meta struct {
	CheckPointID string `json:"eino_checkpoint_id"`
	Encoding     string `json:"encoding"`
}

// Set saves checkPoint under checkPointID for the task ctx carries. Redis
// and network errors are retried (Task.SaveCheckpointWith).
func (CheckPointStore) Set(ctx context.Context, checkPointID string, checkPoint []byte) error {
	t, ns, err := taskFrom(ctx, checkPointID)
	if err != nil {
		return err
	}
	m, data := meta{CheckPointID: checkPointID, Encoding: "json"}, json.RawMessage(checkPoint)
	if !json.Valid(checkPoint) {
		m.Encoding = "base64"
		data, _ = json.Marshal(checkPoint) // a []byte marshals as a base64 string
	}
	md, _ := json.Marshal(m) // strings only
	if _, err := t.SaveCheckpointWith(ctx, fence.CheckpointWrite{NS: ns, Data: data, Metadata: md}); err != nil {
		return fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
	}
	return nil
}

// Get returns the newest checkpoint saved under checkPointID in the thread
// of the task ctx carries; false when there is none.
func (CheckPointStore) Get(ctx context.Context, checkPointID string) ([]byte, bool, error) {
	t, ns, err := taskFrom(ctx, checkPointID)
	if err != nil {
		return nil, false, err
	}
	cp, err := t.Checkpoint(ctx, ns)
	if errors.Is(err, fence.ErrNoCheckpoint) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
	}
	var m meta
	if err := json.Unmarshal(cp.Metadata, &m); err != nil {
		return nil, false, fmt.Errorf("eino checkpoint %q v%d: metadata: %w", checkPointID, cp.Version, err)
	}
	switch m.Encoding {
	case "json":
		return cp.Data, true, nil
	case "base64":
		var b []byte
		if err := json.Unmarshal(cp.Data, &b); err != nil {
			return nil, false, fmt.Errorf("eino checkpoint %q v%d: %w", checkPointID, cp.Version, err)
		}
		return b, true, nil
	}
	return nil, false, fmt.Errorf("eino checkpoint %q v%d: unknown encoding %q", checkPointID, cp.Version, m.Encoding)
}

// Namespace returns the baton checkpoint namespace that holds an Eino
// checkpoint id. An id that is a valid baton id (fence.ValidateID:
// [A-Za-z0-9._-], at most 128 bytes) is kept as it is: "order-42" becomes
// "eino:order-42". Any other non-empty id (a slash, a space, non-ASCII, a
// longer one) is base64url-encoded after "eino:b64:", up to the 256 bytes a
// namespace may have (ids of up to 185 bytes). The mapping is one-to-one;
// CheckPointID reverses it.
func Namespace(checkPointID string) (string, error) {
	if checkPointID == "" {
		return "", fmt.Errorf("eino checkpoint id: %w: empty", fence.ErrInvalidID)
	}
	ns := NSPrefix + checkPointID
	if fence.ValidateID("eino checkpoint id", checkPointID) != nil {
		ns = NSPrefix + b64 + base64.RawURLEncoding.EncodeToString([]byte(checkPointID))
	}
	if err := fence.ValidateNS(ns); err != nil {
		return "", fmt.Errorf("eino checkpoint id %q: %w", checkPointID, err)
	}
	return ns, nil
}

// CheckPointID returns the Eino checkpoint id a namespace made by
// Namespace holds; false for any other namespace.
func CheckPointID(ns string) (string, bool) {
	rest, ok := strings.CutPrefix(ns, NSPrefix)
	if !ok {
		return "", false
	}
	if enc, ok := strings.CutPrefix(rest, b64); ok {
		b, err := base64.RawURLEncoding.DecodeString(enc)
		id := string(b)
		return id, err == nil && id != "" && fence.ValidateID("eino checkpoint id", id) != nil
	}
	return rest, fence.ValidateID("eino checkpoint id", rest) == nil
}
