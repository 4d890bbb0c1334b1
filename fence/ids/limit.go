package ids

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidateLimitKey reports whether key may name a limit's state in Redis:
// what a node's "limits" entry expands to ("openai", "tenant:acme"). The
// id alphabet plus ":" (a namespace separator for prefix rules); no brace
// can forge a hash tag, no "*" or "=" or "," can be mistaken for a rule or
// the stored list's separators.
func ValidateLimitKey(field, key string) error {
	if key == "" {
		return fmt.Errorf("%s: %w: empty limit name", field, ErrInvalid)
	}
	if len(key) > MaxLen {
		return fmt.Errorf("%s: %w: limit name of %d bytes, at most %d", field, ErrInvalid, len(key), MaxLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '.' || c == '_' || c == '-' || c == ':' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(key[i:])
		return fmt.Errorf("%s: %w: %q at byte %d of limit name %q (allowed: A-Z a-z 0-9 . _ - :)", field, ErrInvalid, r, i, key)
	}
	return nil
}

// ValidateLimitName reports whether name may be set as a limit: a key
// (ValidateLimitKey), or a prefix rule "NS:*" that covers every key
// starting with "NS:".
func ValidateLimitName(field, name string) error {
	if rule, ok := strings.CutSuffix(name, "*"); ok {
		if !strings.HasSuffix(rule, ":") || len(rule) < 2 {
			return fmt.Errorf("%s: %w: %q: a prefix rule ends in \":*\" after a name (tenant:*)", field, ErrInvalid, name)
		}
		return ValidateLimitKey(field, rule)
	}
	return ValidateLimitKey(field, name)
}
