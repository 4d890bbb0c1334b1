package admin

import (
	"encoding/json"
	"regexp"
)

// secretKey matches the names of values that look like secrets: an exec
// node's env of OPENAI_API_KEY, a header's Authorization, a password.
var secretKey = regexp.MustCompile(`(?i)(secret|token|passw(or)?d|api[_-]?key|private[_-]?key|credential|authorization|cookie)`)

// redacted is what a secret-looking value is shown as.
const redacted = "[redacted]"

// redact returns raw with the string values of secret-looking keys
// replaced, at any depth, for the views: a value passed literally, not by
// reference ({"$env": NAME} is resolved on the runner and never stored),
// is stored, but not shown. raw that is not JSON is returned as it is.
func redact(raw json.RawMessage) json.RawMessage {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return raw
	}
	changed := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if _, isString := e.(string); isString && secretKey.MatchString(k) {
					x[k], changed = redacted, true
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	v = walk(v)
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
