package fence

import (
	"encoding/json"
	"time"
)

// jsonDetails are the event details that hold JSON text: a parked event's
// request. In JSON they are written as that JSON, not as a string of it,
// so a reader gets the request the node made (`events --json`, the HTTP
// API, the event stream).
var jsonDetails = map[string]map[string]bool{"parked": {"request": true}}

// DetailsJSON returns e.Details for encoding as JSON: every value a string
// but those that hold JSON text (a parked event's request), given as that
// JSON. Never nil.
func (e Event) DetailsJSON() map[string]any {
	out := make(map[string]any, len(e.Details))
	for k, v := range e.Details {
		if jsonDetails[e.Type][k] && json.Valid([]byte(v)) {
			out[k] = json.RawMessage(v)
			continue
		}
		out[k] = v
	}
	return out
}

// eventJSON is Event's JSON shape.
type eventJSON struct {
	ID      string                     `json:"id"`
	Type    string                     `json:"type"`
	Node    string                     `json:"node,omitempty"`
	Epoch   int64                      `json:"epoch"`
	Worker  string                     `json:"worker,omitempty"`
	At      time.Time                  `json:"at"`
	Details map[string]json.RawMessage `json:"details,omitempty"`
}

// MarshalJSON writes the event with its details as DetailsJSON says.
func (e Event) MarshalJSON() ([]byte, error) {
	out := eventJSON{ID: e.ID, Type: e.Type, Node: e.Node, Epoch: e.Epoch, Worker: e.Worker, At: e.At}
	if len(e.Details) > 0 {
		out.Details = make(map[string]json.RawMessage, len(e.Details))
		for k, v := range e.DetailsJSON() {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			out.Details[k] = b
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes: a detail given as JSON
// (not a string) is kept as its JSON text.
func (e *Event) UnmarshalJSON(b []byte) error {
	var in eventJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = Event{ID: in.ID, Type: in.Type, Node: in.Node, Epoch: in.Epoch, Worker: in.Worker, At: in.At}
	if in.Details != nil {
		e.Details = make(map[string]string, len(in.Details))
		for k, raw := range in.Details {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				s = string(raw)
			}
			e.Details[k] = s
		}
	}
	return nil
}
