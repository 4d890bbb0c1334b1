package fence

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ItemSearch is a search of the item store (LangGraph's search, without
// a query: there is no vector index).
type ItemSearch struct {
	// Prefix is the namespace prefix searched; empty: every namespace.
	Prefix []string
	// Filter keeps items whose value matches every field: an exact value
	// (objects match field by field, lists element by element) or an
	// object of operators $eq, $ne, $gt, $gte, $lt, $lte, as LangGraph's
	// InMemoryStore compares.
	Filter map[string]any
	// Limit is the most items returned (zero: 10); Offset how many
	// matches are skipped first. Matches come by namespace, then key.
	Limit, Offset int
	// Refresh restarts the time to live of the items returned.
	Refresh bool
}

// NamespaceQuery lists namespaces (LangGraph's list_namespaces). Prefix
// and Suffix match labels at the start and end, "*" matching any label;
// MaxDepth, above zero, truncates each namespace to that many labels (and
// the truncated ones are listed once). Limit zero: 100.
type NamespaceQuery struct {
	Prefix, Suffix []string
	MaxDepth       int
	Limit, Offset  int
}

// SearchItems returns the items under a namespace prefix that match the
// filter, in namespace then key order, paged by Offset and Limit.
func (s *Store) SearchItems(ctx context.Context, q ItemSearch) ([]Item, error) {
	if err := ValidateNamespace(q.Prefix, false); err != nil {
		return nil, err
	}
	if err := validateFilter(q.Filter); err != nil {
		return nil, err
	}
	limit := cmp.Or(q.Limit, 10)
	namespaces, err := s.indexedNamespaces(ctx, q.Prefix)
	if err != nil {
		return nil, err
	}
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}
	var out []Item
	var empty []string
	skip := max(q.Offset, 0)
	for _, ns := range namespaces {
		if len(out) >= limit {
			break
		}
		m, err := s.rdb.HGetAll(ctx, s.keys.StoreItems(ns)).Result()
		if err != nil {
			return nil, fmt.Errorf("store: search %s: %w", ns, err)
		}
		if len(m) == 0 {
			empty = append(empty, ns)
			continue
		}
		labels := strings.Split(ns, ".")
		for _, key := range slices.Sorted(mapKeys(m)) {
			it, err := parseItem(labels, key, m[key])
			if err != nil || it.expired(now.UnixMilli()) || !matchFilter(it.Value, q.Filter) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			out = append(out, it)
			if len(out) >= limit {
				break
			}
		}
	}
	if q.Refresh {
		if err := s.refreshItems(ctx, out); err != nil {
			return nil, err
		}
	}
	s.unindex(ctx, empty)
	return out, nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// refreshItems restarts the time to live of the items that have one
// (store_get.lua, one call per namespace).
func (s *Store) refreshItems(ctx context.Context, items []Item) error {
	byNS := map[string][]int{}
	var order []string
	for i, it := range items {
		if it.TTL <= 0 {
			continue
		}
		ns := strings.Join(it.Namespace, ".")
		if byNS[ns] == nil {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], i)
	}
	for _, ns := range order {
		keys := make([]string, len(byNS[ns]))
		for j, i := range byNS[ns] {
			keys[j] = items[i].Key
		}
		got, _, err := s.getItems(ctx, items[byNS[ns][0]].Namespace, keys, true)
		if err != nil {
			return err
		}
		for j, i := range byNS[ns] {
			if got[j] != nil {
				items[i].ExpiresAt = got[j].ExpiresAt
			}
		}
	}
	return nil
}

// indexedNamespaces lists the indexed namespaces under prefix (labels joined by
// "."), in the order of their label tuples.
func (s *Store) indexedNamespaces(ctx context.Context, prefix []string) ([]string, error) {
	var names []string
	if len(prefix) == 0 {
		all, err := s.rdb.ZRange(ctx, s.keys.StoreIndex(), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("store: read the index: %w", err)
		}
		names = all
	} else {
		p := strings.Join(prefix, ".")
		// The namespace itself, then those below it ("p." up to "p/",
		// '/' being the byte after '.').
		under, err := s.rdb.ZRangeByLex(ctx, s.keys.StoreIndex(), &redis.ZRangeBy{Min: "[" + p + ".", Max: "(" + p + "/"}).Result()
		if err != nil {
			return nil, fmt.Errorf("store: read the index: %w", err)
		}
		self, err := s.rdb.ZScore(ctx, s.keys.StoreIndex(), p).Result()
		if err != nil && err != redis.Nil {
			return nil, fmt.Errorf("store: read the index: %w", err)
		}
		if err == nil && self == 0 {
			names = append(names, p)
		}
		names = append(names, under...)
	}
	slices.SortFunc(names, func(a, b string) int {
		return slices.Compare(strings.Split(a, "."), strings.Split(b, "."))
	})
	return names, nil
}

// unindex drops the index entries of namespaces found empty, unless a put
// indexed them within unindexGrace (store_unindex.lua). Best effort: an
// entry left is skipped by every reader.
func (s *Store) unindex(ctx context.Context, namespaces []string) {
	if len(namespaces) == 0 {
		return
	}
	args := []any{strconv.FormatInt(unindexGrace.Milliseconds(), 10)}
	for _, ns := range namespaces {
		args = append(args, ns)
	}
	_, _ = s.run(ctx, "store_unindex", []string{s.keys.StoreIndex(), s.keys.StoreIndexed()}, args...)
}

// ListNamespaces lists the namespaces that hold items, as LangGraph's
// list_namespaces: matched by prefix and suffix, truncated to MaxDepth,
// sorted by labels, paged.
func (s *Store) ListNamespaces(ctx context.Context, q NamespaceQuery) ([][]string, error) {
	for _, cond := range [][]string{q.Prefix, q.Suffix} {
		if err := ValidateNamespace(wildcardsAsLabels(cond), false); err != nil {
			return nil, err
		}
	}
	literal := q.Prefix
	if i := slices.Index(q.Prefix, "*"); i >= 0 {
		literal = q.Prefix[:i]
	}
	names, err := s.indexedNamespaces(ctx, literal)
	if err != nil {
		return nil, err
	}
	var candidates []string
	for _, ns := range names {
		labels := strings.Split(ns, ".")
		if matchLabels(labels, q.Prefix, false) && matchLabels(labels, q.Suffix, true) {
			candidates = append(candidates, ns)
		}
	}
	live, empty, err := s.liveNamespaces(ctx, candidates)
	if err != nil {
		return nil, err
	}
	s.unindex(ctx, empty)
	seen := map[string]bool{}
	var out [][]string
	for _, ns := range live {
		labels := strings.Split(ns, ".")
		if q.MaxDepth > 0 && len(labels) > q.MaxDepth {
			labels = labels[:q.MaxDepth]
		}
		if k := strings.Join(labels, "."); !seen[k] {
			seen[k] = true
			out = append(out, labels)
		}
	}
	slices.SortFunc(out, slices.Compare)
	off := min(max(q.Offset, 0), len(out))
	return out[off:min(off+cmp.Or(q.Limit, 100), len(out))], nil
}

// wildcardsAsLabels lets "*" pass namespace validation.
func wildcardsAsLabels(path []string) []string {
	out := slices.Clone(path)
	for i, l := range out {
		if l == "*" {
			out[i] = "x"
		}
	}
	return out
}

// matchLabels matches a namespace against a prefix (or, fromEnd, a
// suffix) whose "*" labels match any label.
func matchLabels(ns, path []string, fromEnd bool) bool {
	if len(path) > len(ns) {
		return false
	}
	for i, p := range path {
		l := ns[i]
		if fromEnd {
			l = ns[len(ns)-len(path)+i]
		}
		if p != "*" && p != l {
			return false
		}
	}
	return true
}

// liveNamespaces keeps the namespaces that hold an item not expired:
// those listed in the index whose items are all gone or expired are
// returned apart (empty).
func (s *Store) liveNamespaces(ctx context.Context, names []string) (live, empty []string, err error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	nowS := strconv.FormatInt(now.UnixMilli(), 10)
	pipe := s.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(names))
	gone := make([]*redis.IntCmd, len(names))
	for i, ns := range names {
		lens[i] = pipe.HLen(ctx, s.keys.StoreItems(ns))
		gone[i] = pipe.ZCount(ctx, s.keys.StoreExpiries(ns), "-inf", nowS)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, nil, fmt.Errorf("store: list namespaces: %w", err)
	}
	for i, ns := range names {
		if lens[i].Val()-gone[i].Val() > 0 {
			live = append(live, ns)
		} else if lens[i].Val() == 0 {
			empty = append(empty, ns)
		}
	}
	return live, empty, nil
}
