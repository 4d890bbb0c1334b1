package fence

import "github.com/batonrun/baton/fence/ids"

// MaxIDLen is the longest accepted ID in bytes. IDs become parts of Redis
// keys and Asynq task IDs, so their size is capped.
const MaxIDLen = ids.MaxLen

// ValidateID reports whether id may become part of a key (ids.Validate:
// only [A-Za-z0-9._-], not dots alone, at most MaxIDLen bytes). field
// names the input in the error ("run id", "nodes[3].id"); the error wraps
// ErrInvalidID.
func ValidateID(field, id string) error { return ids.Validate(field, id) }
