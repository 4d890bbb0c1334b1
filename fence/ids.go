package fence

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxIDLen is the longest accepted ID in bytes. IDs become parts of Redis
// keys and Asynq task IDs, so their size is capped.
const MaxIDLen = 128

// ValidateID reports whether id may become part of a key. Only
// [A-Za-z0-9._-] is accepted: no brace can forge a Redis Cluster hash tag and
// no colon or slash can reach another key or split a token. An id of dots
// alone ("." or "..") is refused too: it is a valid key part, but in a URL
// path such as /v1/runs/{id} it is a relative segment that clients and
// servers resolve away, so the run could be created and never reached.
// field names the input in the error ("run id", "nodes[3].id").
func ValidateID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%s: %w: empty", field, ErrInvalidID)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%s: %w: %d bytes, at most %d", field, ErrInvalidID, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '.' || c == '_' || c == '-' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("%s: %w: %q at byte %d (allowed: A-Z a-z 0-9 . _ -)", field, ErrInvalidID, r, i)
	}
	if strings.Trim(id, ".") == "" {
		return fmt.Errorf("%s: %w: %q is only dots, which a URL path resolves as . or .. (add a letter or digit)", field, ErrInvalidID, id)
	}
	return nil
}
