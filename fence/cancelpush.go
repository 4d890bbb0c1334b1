package fence

import "strings"

// CancelChannel is the Pub/Sub channel on which cancel.lua announces a
// cancelled run whose nodes are still RUNNING, so that their owners stop
// them at once instead of at their next heartbeat. Each message is a
// CancelMessage. Pub/Sub delivers at most once: the heartbeat's cancel flag
// stays the fallback.
func (k Keys) CancelChannel() string { return k.prefix() + ":cancel" }

// CancelMessage is what cancel.lua publishes on CancelChannel: the run id,
// and the run's incarnation so that a worker does not stop a later run that
// reuses the id.
type CancelMessage struct {
	Run         string
	Incarnation string // empty for runs stored before incarnations existed
}

// ParseCancelMessage parses a CancelChannel payload: "run" or
// "run~incarnation" (Token's spelling of a run).
func ParseCancelMessage(payload string) (CancelMessage, error) {
	run, inc, hasInc := strings.Cut(payload, "~")
	if err := ValidateID("cancel message run", run); err != nil {
		return CancelMessage{}, err
	}
	if hasInc {
		if err := ValidateID("cancel message incarnation", inc); err != nil {
			return CancelMessage{}, err
		}
	}
	return CancelMessage{Run: run, Incarnation: inc}, nil
}

// Matches reports whether l is an attempt of the cancelled run.
func (m CancelMessage) Matches(l Lease) bool {
	return l.Run == m.Run && (m.Incarnation == "" || l.Incarnation == "" || l.Incarnation == m.Incarnation)
}
