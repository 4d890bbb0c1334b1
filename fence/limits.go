package fence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence/ids"
)

// Limit is a named, fleet-wide limit that nodes take part in by naming it
// in their spec ("limits": ["openai"]). Concurrency caps the nodes that
// run under one key at once; Rate caps claims (or units of cost) per
// Period, with Burst more allowed at once. Either or both.
//
// A Name ending in ":*" is a prefix rule: it sets the limit of every key
// that starts with what precedes the "*" ("tenant:*" covers "tenant:acme"),
// each key counted on its own. A key set by name wins over a rule, and
// the longest rule wins over a shorter one.
//
// In JSON: {"name": "openai", "concurrency": 3, "rate": "20/s", "burst": 5}.
type Limit struct {
	Name        string
	Concurrency int
	Rate        int
	Period      time.Duration
	Burst       int
}

type limitJSON struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        string `json:"rate,omitempty"`
	Burst       int    `json:"burst,omitempty"`
}

// MarshalJSON writes the rate as "N/PERIOD".
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitJSON{Name: l.Name, Concurrency: l.Concurrency, Rate: l.RateString(), Burst: l.Burst})
}

// UnmarshalJSON reads the form MarshalJSON writes, refusing unknown
// fields and a malformed rate (its error names the field).
func (l *Limit) UnmarshalJSON(b []byte) error {
	var j limitJSON
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return fmt.Errorf("limit: %w", err)
	}
	out := Limit{Name: j.Name, Concurrency: j.Concurrency, Burst: j.Burst}
	if j.Concurrency == 0 && bytes.Contains(b, []byte(`"concurrency"`)) {
		// An explicit 0 would read as "no concurrency limit".
		return fmt.Errorf("%w: limit %q: concurrency: 0, want 1 or more (delete the limit to lift it)", ErrInvalidData, j.Name)
	}
	if j.Rate != "" {
		n, p, err := ParseRate(j.Rate)
		if err != nil {
			return fmt.Errorf("%w: limit %q: %w", ErrInvalidData, j.Name, err)
		}
		out.Rate, out.Period = n, p
	}
	*l = out
	return nil
}

// ErrNoLimit: a limit name is neither set nor covered by a prefix rule.
var ErrNoLimit = errors.New("fence: no such limit")

// ParseRate reads "N/PERIOD": a positive count per period, the period a
// unit (s, m, h, d, "second", "minute", "hour", "day") or a Go duration
// ("10s", "1m30s"). "10/fortnight" is refused.
func ParseRate(s string) (n int, period time.Duration, err error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate: %q: want N/PERIOD, such as 20/s, 600/m or 90000/1m", s)
	}
	n, err = strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("rate: %q: %q is not a positive whole number", s, num)
	}
	switch p := strings.TrimSpace(per); p {
	case "s", "sec", "second":
		period = time.Second
	case "m", "min", "minute":
		period = time.Minute
	case "h", "hour":
		period = time.Hour
	case "d", "day":
		period = 24 * time.Hour
	default:
		period, err = time.ParseDuration(p)
		if err != nil || period <= 0 {
			return 0, 0, fmt.Errorf("rate: %q: period %q: want s, m, h, d or a duration such as 10s", s, p)
		}
	}
	if period < time.Millisecond {
		return 0, 0, fmt.Errorf("rate: %q: period below 1ms", s)
	}
	return n, period, nil
}

// RateString writes the rate as ParseRate reads it; "" without one.
func (l Limit) RateString() string {
	if l.Rate <= 0 {
		return ""
	}
	switch l.Period {
	case time.Second:
		return strconv.Itoa(l.Rate) + "/s"
	case time.Minute:
		return strconv.Itoa(l.Rate) + "/m"
	case time.Hour:
		return strconv.Itoa(l.Rate) + "/h"
	case 24 * time.Hour:
		return strconv.Itoa(l.Rate) + "/d"
	}
	return strconv.Itoa(l.Rate) + "/" + l.Period.String()
}

// Validate returns every problem of the limit, each naming its field.
func (l Limit) Validate() error {
	var errs []error
	if err := ids.ValidateLimitName("name", l.Name); err != nil {
		errs = append(errs, err)
	}
	if l.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency: %d, want 1 or more (delete the limit to lift it)", l.Concurrency))
	}
	if l.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate: %d, want 1 or more", l.Rate))
	}
	if l.Rate > 0 && l.Period < time.Millisecond {
		errs = append(errs, fmt.Errorf("rate: period %s, want 1ms or more", l.Period))
	}
	if l.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst: %d, want 0 or more", l.Burst))
	}
	if l.Burst > 0 && l.Rate == 0 {
		errs = append(errs, errors.New("burst: needs a rate"))
	}
	if l.Concurrency == 0 && l.Rate == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("concurrency, rate: set one or both (a limit of 0 would stop every node: delete the limit instead)"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: limit %q: %w", ErrInvalidData, l.Name, errors.Join(errs...))
	}
	return nil
}

// encode is the definition as claim.lua reads it:
// "concurrency,rate,period_ms,burst", 0 where unset.
func (l Limit) encode() string {
	return fmt.Sprintf("%d,%d,%d,%d", l.Concurrency, l.Rate, l.Period.Milliseconds(), l.Burst)
}

func decodeLimit(name, v string) (Limit, bool) {
	p := strings.Split(v, ",")
	if len(p) != 4 {
		return Limit{}, false
	}
	var n [4]int64
	for i := range p {
		x, err := strconv.ParseInt(p[i], 10, 64)
		if err != nil {
			return Limit{}, false
		}
		n[i] = x
	}
	return Limit{Name: name, Concurrency: int(n[0]), Rate: int(n[1]), Period: time.Duration(n[2]) * time.Millisecond, Burst: int(n[3])}, true
}

// SetLimit stores l, replacing the limit of that name; the next claim of
// every node under it follows it, with no restart, and so does the next
// free of a slot (limitset.go): a raised limit wakes its waiters at once.
// An invalid limit is ErrInvalidData and stores nothing.
func (s *Store) SetLimit(ctx context.Context, l Limit) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if _, err := s.applyLimit(ctx, l.Name, l.encode()); err != nil {
		return fmt.Errorf("set limit %s: %w", l.Name, err)
	}
	return nil
}

// DeleteLimit removes the limit name; it reports whether there was one.
// Nodes that name it are no longer held back by it, and new runs naming
// it are refused at submit (unless a prefix rule covers it).
func (s *Store) DeleteLimit(ctx context.Context, name string) (bool, error) {
	if err := ids.ValidateLimitName("name", name); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	existed, err := s.applyLimit(ctx, name, "")
	if err != nil {
		return false, fmt.Errorf("delete limit %s: %w", name, err)
	}
	return existed, nil
}

// Limits returns every limit set, by name.
func (s *Store) Limits(ctx context.Context) ([]Limit, error) {
	raw, err := s.rdb.HGetAll(ctx, s.keys.LimitDefs()).Result()
	if err != nil {
		return nil, fmt.Errorf("read limits: %w", err)
	}
	out := make([]Limit, 0, len(raw))
	for name, v := range raw {
		if l, ok := decodeLimit(name, v); ok {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Resolve returns the limit that governs key among limits: the limit set
// under key itself, else the longest prefix rule that covers it.
func Resolve(limits []Limit, key string) (Limit, bool) {
	var best Limit
	found := false
	for _, l := range limits {
		if l.Name == key {
			return l, true
		}
		if rule, ok := strings.CutSuffix(l.Name, "*"); ok && strings.HasPrefix(key, rule) {
			if !found || len(l.Name) > len(best.Name) {
				best, found = l, true
			}
		}
	}
	return best, found
}

// CheckDeclared returns, for each key that no limit governs, its index in
// keys; reading the limits once. It is what a submit checks before it
// stores a run whose nodes name limits: a submitter cannot name a limit
// that was never set (and so cannot raise one).
func (s *Store) CheckDeclared(ctx context.Context, keys []string) ([]int, error) {
	limits, err := s.Limits(ctx)
	if err != nil {
		return nil, err
	}
	var missing []int
	for i, k := range keys {
		if _, ok := Resolve(limits, k); !ok {
			missing = append(missing, i)
		}
	}
	return missing, nil
}
