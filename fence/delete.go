package fence

import (
	"context"
	"errors"
	"fmt"
)

// RunActiveError is DeleteRun's refusal of a run that has not ended: it
// says the status the run has.
type RunActiveError struct {
	Run, Status string
}

func (e *RunActiveError) Error() string {
	return fmt.Sprintf("delete %s: run is %s: %v", e.Run, e.Status, ErrRunActive)
}

func (e *RunActiveError) Unwrap() error { return ErrRunActive }

// DeleteRun removes an ended run's keys at once (delete.lua) and returns
// the status it ended with: ErrNotFound for no such run, a
// *RunActiveError (ErrRunActive) for a run that has not ended. A run of a
// thread has its locator in another slot; it is deleted after the script,
// and should that fail the retention sweep expires it.
func (s *Store) DeleteRun(ctx context.Context, run string) (string, error) {
	if err := ValidateID("run id", run); err != nil {
		return "", err
	}
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", run, err)
	}
	ids, err := s.nodeIDs(ctx, thread, run)
	if errors.Is(err, ErrNotFound) {
		ids, err = nil, nil // packed into one key (the script reads it), or gone
	}
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", run, err)
	}
	sh := ShardOf(thread)
	keys := []string{s.keys.Run(thread, run), s.keys.Events(thread, run), s.keys.Runs(sh), s.keys.Finished(sh),
		s.keys.Packed(thread, run)}
	for _, id := range ids {
		keys = append(keys, s.keys.Node(thread, run, id))
	}
	elsewhere := "1"
	if thread == run {
		keys, elsewhere = append(keys, s.keys.Locator(run)), ""
	}
	keys = append(keys, s.streamKeys(thread, run)...) // the run's chunk stream (stream.go) goes with it
	v, err := s.run(ctx, "delete", keys, run, Ref(thread, run, ""), len(ids), elsewhere)
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", run, err)
	}
	_, r, err := reply(v)
	switch {
	case errors.Is(err, ErrRunActive):
		return "", &RunActiveError{Run: run, Status: asString(r[0])}
	case err != nil:
		return "", fmt.Errorf("delete %s: %w", run, err)
	}
	status := asString(r[0])
	if elsewhere != "" {
		pipe := s.rdb.Pipeline()
		pipe.Del(ctx, s.keys.Locator(run))
		pipe.ZRem(ctx, s.keys.Finished(sh), run)
		if _, err := pipe.Exec(ctx); err != nil {
			return status, fmt.Errorf("delete %s: locator (the retention sweep expires it): %w", run, err)
		}
	}
	return status, nil
}
