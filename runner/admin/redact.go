package admin

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
)

// The views redact in two ways. What a runner resolved from an $env or a
// $file reference, and the operator's named secrets (REDACT_ENV), are
// redacted by value before they are stored (runner/kinds.Redactor): no
// result, error or event holds them. The node view applies the operator's
// values again (Config.Redact), for what another runner stored. What a
// spec wrote literally, and what a command returns, is stored as it is;
// redact keeps it off the views by the shapes secrets have (in a node's
// input and in its result alike), which is a guess, not a guarantee: pass
// credentials by reference.

// secretKey matches the names of values that look like secrets: an exec
// node's env of OPENAI_API_KEY or OPENAI_KEY, a header's Authorization, a
// password, DB_PASS, a DSN.
var secretKey = regexp.MustCompile(`(?i)(secret|token|passw(or)?d|api[_-]?key|private[_-]?key|credential|authorization|cookie|` +
	`(^|[_-])(key|pass|pwd|dsn|auth|session)($|[_-]))`)

// secretArg matches a command argument that carries a secret after a
// secret-looking flag or scheme: --password=x, --api-key=x, "Bearer x".
var secretArg = regexp.MustCompile(`(?i)^(-{1,2}[a-z0-9_-]*(secret|token|passw(or)?d|pass|pwd|api[_-]?key|key|auth)[a-z0-9_-]*[=:])(.+)$|` +
	`((bearer|basic|token)\s+)\S+`)

// redacted is what a secret-looking value is shown as.
const redacted = "[redacted]"

// redact returns raw with the values of secret-looking keys replaced, at
// any depth and whatever their type; URLs with a password (a DATABASE_URL)
// shown without it; and secret-looking command arguments (--password=x,
// "Authorization: Bearer x") replaced. raw that is not JSON is returned
// as it is.
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
				if _, ref := e.(map[string]any); !ref && e != nil && secretKey.MatchString(k) {
					x[k], changed = redacted, true // a {"$env": ...} reference stays readable
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if s := redactString(x); s != x {
				changed = true
				return s
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

// redactString hides the password of a URL and a secret after a flag or
// an auth scheme.
func redactString(s string) string {
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				return strings.Replace(u.Redacted(), "xxxxx", redacted, 1)
			}
		}
	}
	return secretArg.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretArg.FindStringSubmatch(m)
		if sub[1] != "" {
			return sub[1] + redacted
		}
		return sub[5] + redacted
	})
}
