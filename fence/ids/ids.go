// Package ids holds the rule for the ids baton puts into Redis keys, Asynq
// task ids and URL paths: runs, threads, nodes. It is fence's rule, split
// out with nothing but the standard library so that code which only checks
// input (package spec) can apply it without linking Redis.
package ids

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalid: an id is empty, too long or holds a character outside
// [A-Za-z0-9._-] (fence.ErrInvalidID is the same error). Its text names
// no package: it reaches users ("thread: invalid id: ...").
var ErrInvalid = errors.New("invalid id")

// MaxLen is the longest accepted ID in bytes. IDs become parts of Redis
// keys and Asynq task IDs, so their size is capped.
const MaxLen = 128

// Validate reports whether id may become part of a key. Only
// [A-Za-z0-9._-] is accepted: no brace can forge a Redis Cluster hash tag and
// no colon or slash can reach another key or split a token. An id of dots
// alone ("." or "..") is refused too: it is a valid key part, but in a URL
// path such as /v1/runs/{id} it is a relative segment that clients and
// servers resolve away, so the run could be created and never reached.
// field names the input in the error ("run id", "nodes[3].id").
func Validate(field, id string) error {
	if id == "" {
		return fmt.Errorf("%s: %w: empty", field, ErrInvalid)
	}
	if len(id) > MaxLen {
		return fmt.Errorf("%s: %w: %d bytes, at most %d", field, ErrInvalid, len(id), MaxLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '.' || c == '_' || c == '-' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("%s: %w: %q at byte %d (allowed: A-Z a-z 0-9 . _ -)", field, ErrInvalid, r, i)
	}
	if strings.Trim(id, ".") == "" {
		return fmt.Errorf("%s: %w: %q is only dots, which a URL path resolves as . or .. (add a letter or digit)", field, ErrInvalid, id)
	}
	return nil
}
