package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/compose"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// WaitNSPrefix starts the baton namespace where the kind keeps the request
// of a graph parked for a person (WaitNamespace).
const WaitNSPrefix = "eino-wait:"

// Request is what a node parked by an Eino interrupt asks: its wait's
// request, shown by `enqueue status` and the run view. The kind also saves
// it, fenced, in WaitNamespace, because Eino resumes an interrupt by its id
// (compose.ResumeWithData) and the attempt after a resume must name it.
type Request struct {
	// CheckPointID is the graph's Eino checkpoint id; Version the baton
	// version of the checkpoint Eino saved as it interrupted.
	CheckPointID string `json:"eino_checkpoint_id"`
	Version      int64  `json:"eino_checkpoint_version"`
	// Interrupts are the points that asked: compose.InterruptInfo's root
	// causes.
	Interrupts []Interrupt `json:"interrupts"`
}

// Interrupt is one point of a graph that asked a person
// (compose.InterruptCtx).
type Interrupt struct {
	ID      string          `json:"id"`      // Eino's interrupt id
	Address string          `json:"address"` // "runnable:approval;node:approve"
	Info    json.RawMessage `json:"info"`    // the info the node passed to compose.Interrupt
}

// WaitNamespace returns the baton namespace holding the Request of the
// graph under checkPointID: Namespace's, with WaitNSPrefix for NSPrefix
// ("eino:order-42" → "eino-wait:order-42"). It has five bytes more, so it
// takes plain ids and base64 ones of up to 181 bytes.
func WaitNamespace(checkPointID string) (string, error) {
	ns, err := Namespace(checkPointID)
	if err != nil {
		return "", err
	}
	ns = WaitNSPrefix + strings.TrimPrefix(ns, NSPrefix)
	if err := fence.ValidateNS(ns); err != nil {
		return "", fmt.Errorf("eino checkpoint id %q: %w", checkPointID, err)
	}
	return ns, nil
}

// forPerson reports whether an interrupt was raised by a node
// (compose.Interrupt, StatefulInterrupt, CompositeInterrupt): Eino lists
// such a node to run again, in the graph or in a subgraph. An interrupt
// before or after nodes lists none; the kind treats it as a save point.
func forPerson(info *compose.InterruptInfo) bool {
	if info == nil {
		return false
	}
	if len(info.RerunNodes) > 0 {
		return true
	}
	for _, sub := range info.SubGraphs {
		if forPerson(sub) {
			return true
		}
	}
	return false
}

// park saves what the graph asks and returns the error that parks the
// node with it. The save is fenced like Eino's own (the graph's checkpoint
// was saved just before, by this claim), and so is the park: a worker that
// lost the node stores neither.
func park(ctx context.Context, t *runner.Task, id string, info *compose.InterruptInfo) error {
	ns, err := Namespace(id)
	if err != nil {
		return err
	}
	wns, err := WaitNamespace(id)
	if err != nil {
		return runner.Permanent(err)
	}
	cp, err := t.Checkpoint(ctx, ns)
	if err != nil {
		return fmt.Errorf("eino wait %q: the interrupt's checkpoint: %w", id, err)
	}
	req := Request{CheckPointID: id, Version: cp.Version}
	for _, ic := range info.InterruptContexts {
		if !ic.IsRootCause {
			continue
		}
		b, err := json.Marshal(ic.Info)
		if err != nil {
			b, _ = json.Marshal(fmt.Sprint(ic.Info))
		}
		req.Interrupts = append(req.Interrupts, Interrupt{ID: ic.ID, Address: ic.Address.String(), Info: b})
	}
	data, err := json.Marshal(req)
	if err != nil {
		return runner.Permanent(fmt.Errorf("eino wait %q: %w", id, err))
	}
	if _, err := t.SaveCheckpointWith(ctx, fence.CheckpointWrite{NS: wns, Data: data}); err != nil {
		return fmt.Errorf("eino wait %q: %w", id, err)
	}
	return runner.Park(runner.Wait{Request: data})
}

// resumeContext returns ctx carrying value as Eino's resume data for the
// interrupts the node was parked on (compose.BatchResumeWithData), for
// the graph's next Invoke; a node reads it with
// compose.GetResumeContext[json.RawMessage].
//
// With one interrupt, it gets the value. With several, a value that is an
// object whose keys are all interrupt ids gives each of those its own
// (the others are not resumed, and ask again); any other value goes to
// every one. When the graph has saved a checkpoint since it parked, the
// answer was taken already, by an attempt that then lost the node, and
// it is not delivered again.
func resumeContext(ctx context.Context, t *runner.Task, id string, value json.RawMessage) (context.Context, error) {
	ns, err := Namespace(id)
	if err != nil {
		return nil, err
	}
	wns, err := WaitNamespace(id)
	if err != nil {
		return nil, runner.Permanent(err)
	}
	rc, err := t.Checkpoint(ctx, wns)
	if errors.Is(err, fence.ErrNoCheckpoint) {
		// Resumed, but not by this kind's park: nothing to answer.
		return nil, runner.Permanent(fmt.Errorf("eino wait %q: resumed, but the graph never parked: %w", id, err))
	}
	if err != nil {
		return nil, fmt.Errorf("eino wait %q: %w", id, err)
	}
	var req Request
	if err := json.Unmarshal(rc.Data, &req); err != nil {
		return nil, runner.Permanent(fmt.Errorf("eino wait %q v%d: %w", id, rc.Version, err))
	}
	cp, err := t.Checkpoint(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("eino wait %q: the graph's checkpoint: %w", id, err)
	}
	if cp.Version != req.Version {
		return ctx, nil // the graph went past the interrupt: answered already
	}
	return compose.BatchResumeWithData(ctx, resumeData(req.Interrupts, value)), nil
}

// resumeData maps interrupt ids to their values, as resumeContext says.
func resumeData(ints []Interrupt, value json.RawMessage) map[string]any {
	data := make(map[string]any, len(ints))
	var each map[string]json.RawMessage
	if len(ints) > 1 && json.Unmarshal(value, &each) == nil && len(each) > 0 {
		for _, in := range ints {
			if v, ok := each[in.ID]; ok {
				data[in.ID] = v
				delete(each, in.ID)
			}
		}
		if len(each) == 0 {
			return data
		}
		clear(data) // a key that is no interrupt id: the value is for all
	}
	for _, in := range ints {
		data[in.ID] = value
	}
	return data
}
