package fence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The item store: LangGraph's BaseStore (long-term memory a graph reads
// and writes through its `store`, and the Agent Server API's /store
// routes) on Redis. The Python and JS stores (python/baton_langgraph/
// store.py, js/src/store.js) run the same scripts on the same keys.
//
// A namespace (a tuple of labels) is one hash of items and one zset of
// expiries, hash-tagged together, so every write to a namespace is one
// script in one Redis Cluster slot. An index of namespaces (another slot)
// serves search and list_namespaces; a put indexes first, then writes
// (store_index.lua, store_put.lua), so a namespace with items is always
// indexed, and readers skip an index entry whose items are gone.

// Limits of the item store: a namespace is part of a Redis key and of the
// index, and a value lives in one hash field.
const (
	// MaxNamespaceDepth is the most labels a namespace has.
	MaxNamespaceDepth = 32
	// MaxNamespaceLabel is the longest label, in bytes.
	MaxNamespaceLabel = 256
	// MaxNamespaceBytes is the longest namespace, its labels joined by ".".
	MaxNamespaceBytes = 1024
	// MaxItemKey is the longest item key, in bytes.
	MaxItemKey = 1024
	// DefaultItemBytes caps an item's value (its JSON text).
	DefaultItemBytes = 1 << 20
	// unindexGrace is how long an index entry whose namespace has no items
	// is kept after its last put's index step (the put's second step may
	// still come).
	unindexGrace = time.Hour
)

// ErrInvalidNamespace: a namespace (or a prefix or suffix naming some) is
// not one LangGraph accepts, or over the store's limits; the message says
// which label and why.
var ErrInvalidNamespace = errors.New("fence: invalid namespace")

// ErrInvalidItem: an item's key or value is not one the store keeps (a
// value that is not a JSON object, a key too long).
var ErrInvalidItem = errors.New("fence: invalid item")

// StoreItems is a namespace's hash of items: key -> "created updated ttl
// expires json" (store_put.lua). The tag holds the namespace (labels
// joined by "."; "n:" first, so the tag is never empty), which puts the
// hash and StoreExpiries in one slot whatever the labels hold.
func (k Keys) StoreItems(ns string) string { return k.prefix() + ":store:{n:" + ns + "}:items" }

// StoreExpiries is a namespace's zset of its items' expiries (key -> ms).
func (k Keys) StoreExpiries(ns string) string { return k.prefix() + ":store:{n:" + ns + "}:ttl" }

// StoreIndex is the index of namespaces (zset, every score 0, so in
// lexical order), and StoreIndexed when each was last indexed (hash).
func (k Keys) StoreIndex() string   { return k.prefix() + ":store:{index}:ns" }
func (k Keys) StoreIndexed() string { return k.prefix() + ":store:{index}:seen" }

// Item is one stored item.
type Item struct {
	Namespace []string
	Key       string
	// Value is a JSON object, as its writer encoded it.
	Value     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// TTL is the item's time to live (zero: none); ExpiresAt when it
	// expires unless read with a refresh or written again.
	TTL       time.Duration
	ExpiresAt time.Time
}

// ItemWrite puts an item, or deletes it when Value is nil.
type ItemWrite struct {
	Namespace []string
	Key       string
	Value     json.RawMessage
	// TTL, when above zero, expires the item that long after its last
	// write (or read with a refresh).
	TTL time.Duration
}

// ValidateNamespace checks a namespace as LangGraph does (no empty label,
// no "." or NUL in one) and against the store's limits. forPut also
// refuses what only a write may not name: an empty namespace, and the
// root label "langgraph". The error wraps ErrInvalidNamespace.
func ValidateNamespace(ns []string, forPut bool) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidNamespace, fmt.Sprintf(format, a...))
	}
	if forPut && len(ns) == 0 {
		return bad("a namespace has at least one label")
	}
	if len(ns) > MaxNamespaceDepth {
		return bad("%d labels, at most %d", len(ns), MaxNamespaceDepth)
	}
	for _, l := range ns {
		switch {
		case l == "":
			return bad("labels cannot be empty (got %q)", ns)
		case strings.ContainsRune(l, '.'):
			return bad("label %q contains a period: labels cannot contain periods", l)
		case strings.ContainsRune(l, 0):
			return bad("label %q contains a NUL byte", l)
		case len(l) > MaxNamespaceLabel:
			return bad("a label of %d bytes, at most %d", len(l), MaxNamespaceLabel)
		}
	}
	if n := len(strings.Join(ns, ".")); n > MaxNamespaceBytes {
		return bad("%d bytes joined, at most %d", n, MaxNamespaceBytes)
	}
	if forPut && ns[0] == "langgraph" {
		return bad(`the root label cannot be "langgraph"`)
	}
	return nil
}

func validateItemKey(key string) error {
	if len(key) > MaxItemKey {
		return fmt.Errorf("%w: a key of %d bytes, at most %d", ErrInvalidItem, len(key), MaxItemKey)
	}
	return nil
}

// PutItems writes items (LangGraph's put and delete): each namespace's
// writes are one script, after one script that indexes every namespace
// written. Each write is safe to retry; writes to different namespaces
// are not one atomic step. A value must be a JSON object of at most
// DefaultItemBytes; nothing is written when any write is invalid.
func (s *Store) PutItems(ctx context.Context, writes []ItemWrite) error {
	type group struct{ args []any }
	groups := map[string]*group{}
	var order, index []string
	for _, w := range writes {
		if err := ValidateNamespace(w.Namespace, w.Value != nil); err != nil {
			return err
		}
		if err := validateItemKey(w.Key); err != nil {
			return err
		}
		value := ""
		if w.Value != nil {
			v, err := compactObject(w.Value)
			if err != nil {
				return err
			}
			value = v
		}
		ns := strings.Join(w.Namespace, ".")
		g := groups[ns]
		if g == nil {
			g = &group{}
			groups[ns] = g
			order = append(order, ns)
		}
		if w.Value != nil && !slices.Contains(index, ns) {
			index = append(index, ns)
		}
		ttl := int64(0)
		if w.TTL > 0 {
			ttl = max(w.TTL.Milliseconds(), 1)
		}
		g.args = append(g.args, w.Key, value, strconv.FormatInt(ttl, 10))
	}
	if len(index) > 0 {
		args := make([]any, len(index))
		for i, ns := range index {
			args[i] = ns
		}
		if _, err := s.run(ctx, "store_index", []string{s.keys.StoreIndex(), s.keys.StoreIndexed()}, args...); err != nil {
			return fmt.Errorf("store: index %s: %w", strings.Join(index, ", "), err)
		}
	}
	for _, ns := range order {
		if _, err := s.run(ctx, "store_put", []string{s.keys.StoreItems(ns), s.keys.StoreExpiries(ns)}, groups[ns].args...); err != nil {
			return fmt.Errorf("store: put in %s: %w", ns, err)
		}
	}
	return nil
}

// compactObject checks that raw is a JSON object within the size cap and
// returns it compacted.
func compactObject(raw json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("%w: the value is not JSON: %v", ErrInvalidItem, err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return "", fmt.Errorf("%w: the value must be a JSON object", ErrInvalidItem)
	}
	if buf.Len() > DefaultItemBytes {
		return "", fmt.Errorf("%w: %w: the value is %d bytes, at most %d", ErrInvalidItem, ErrTooLarge, buf.Len(), DefaultItemBytes)
	}
	return buf.String(), nil
}

// GetItem reads one item (nil when there is none), restarting its time
// to live when refresh is set and it has one.
func (s *Store) GetItem(ctx context.Context, ns []string, key string, refresh bool) (*Item, error) {
	if err := ValidateNamespace(ns, false); err != nil {
		return nil, err
	}
	items, _, err := s.getItems(ctx, ns, []string{key}, refresh)
	if err != nil {
		return nil, err
	}
	return items[0], nil
}

// getItems runs store_get.lua: the items of keys (nil where none) and how
// many items the namespace holds.
func (s *Store) getItems(ctx context.Context, ns []string, keys []string, refresh bool) ([]*Item, int64, error) {
	joined := strings.Join(ns, ".")
	args := make([]any, 0, len(keys)+1)
	args = append(args, map[bool]string{true: "1", false: "0"}[refresh])
	for _, k := range keys {
		args = append(args, k)
	}
	v, err := s.run(ctx, "store_get", []string{s.keys.StoreItems(joined), s.keys.StoreExpiries(joined)}, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: get in %s: %w", joined, err)
	}
	r, ok := v.([]any)
	if !ok || len(r) != len(keys)+2 {
		return nil, 0, fmt.Errorf("store: get in %s: unexpected reply %v", joined, v)
	}
	now := asInt(r[0])
	out := make([]*Item, len(keys))
	for i, k := range keys {
		if raw, ok := r[i+2].(string); ok {
			if it, err := parseItem(ns, k, raw); err == nil && !it.expired(now) {
				out[i] = &it
			}
		}
	}
	return out, asInt(r[1]), nil
}

// parseItem reads an item as store_put.lua stores it.
func parseItem(ns []string, key, raw string) (Item, error) {
	var nums [4]int64
	rest := raw
	for i := range nums {
		field, tail, ok := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(field, 10, 64)
		if !ok || err != nil {
			return Item{}, fmt.Errorf("store: item %s in %s: malformed", key, strings.Join(ns, "."))
		}
		nums[i], rest = n, tail
	}
	it := Item{Namespace: ns, Key: key, Value: json.RawMessage(rest),
		CreatedAt: time.UnixMilli(nums[0]).UTC(), UpdatedAt: time.UnixMilli(nums[1]).UTC(),
		TTL: time.Duration(nums[2]) * time.Millisecond}
	if nums[3] > 0 {
		it.ExpiresAt = time.UnixMilli(nums[3]).UTC()
	}
	return it, nil
}

// expired says whether the item's expiry passed at now (ms, Redis time):
// a script prunes at most 100 expired items a call, so a reader checks.
func (it Item) expired(now int64) bool {
	return !it.ExpiresAt.IsZero() && it.ExpiresAt.UnixMilli() <= now
}
