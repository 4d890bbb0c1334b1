package fence

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/scripts/lua"
)

// packedRun is a finished run's keys as scripts/lua/lib/pack.lua packs
// them into one string: the run hash, the node hashes in the order they
// were packed, and the event stream, each value as stored.
type packedRun struct {
	Run    map[string]string
	Nodes  []map[string]string
	Events []redis.XMessage
}

// packDict is lib/pack.lua's table of texts, read from the script itself
// so that the two can never differ.
// A build without it leaves the table empty, and unpackRun refuses every
// input.
var packDict = func() []string {
	src, _ := lua.FS.ReadFile("lib/pack.lua")
	from := strings.Index(string(src), "-- @dict")
	to := strings.Index(string(src), "-- @enddict")
	if from < 0 || to < from {
		return nil
	}
	var out []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(string(src[from:to]), -1) {
		out = append(out, m[1])
	}
	return out
}()

// errPacked reports a packed run that cannot be read.
var errPacked = errors.New("fence: packed run is malformed")

type unpacker struct {
	b     []byte
	texts []string
	base  int64
}

func (u *unpacker) varint() (uint64, error) {
	var n uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if len(u.b) == 0 {
			return 0, errPacked
		}
		c := u.b[0]
		u.b = u.b[1:]
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return n, nil
		}
	}
	return 0, errPacked
}

func unzigzag(n uint64) int64 {
	if n%2 == 1 {
		return -int64((n + 1) / 2)
	}
	return int64(n / 2)
}

func (u *unpacker) bytes(n uint64) ([]byte, error) {
	if n > uint64(len(u.b)) {
		return nil, errPacked
	}
	out := u.b[:n]
	u.b = u.b[n:]
	return out, nil
}

func (u *unpacker) value() (string, error) {
	h, err := u.varint()
	if err != nil {
		return "", err
	}
	if h%2 == 1 {
		if i := h / 2; i < uint64(len(u.texts)) {
			return u.texts[i], nil
		}
		return "", errPacked
	}
	tag, arg := (h/2)%4, h/8
	switch tag {
	case 0, 1:
		raw, err := u.bytes(arg)
		if err != nil {
			return "", err
		}
		s := string(raw)
		if tag == 1 {
			s = hex.EncodeToString(raw)
		}
		u.texts = append(u.texts, s)
		return s, nil
	case 2:
		return strconv.FormatInt(unzigzag(arg), 10), nil
	default:
		return strconv.FormatInt(u.base+unzigzag(arg), 10), nil
	}
}

// record reads a record as names and values in order.
func (u *unpacker) record() ([]string, error) {
	n, err := u.varint()
	if err != nil {
		return nil, err
	}
	return u.values(nil, 2*n)
}

// eventFields are the fields an event record may leave unnamed.
var eventFields = []string{"type", "node", "epoch", "worker", "at"}

// event reads an event record as names and values in order.
func (u *unpacker) event() ([]string, error) {
	n, err := u.varint()
	if err != nil {
		return nil, err
	}
	if n%2 == 0 {
		return u.values(nil, n)
	}
	var out []string
	for _, name := range eventFields {
		v, err := u.value()
		if err != nil {
			return nil, err
		}
		out = append(out, name, v)
	}
	return u.values(out, n-1)
}

// values appends n values to out.
func (u *unpacker) values(out []string, n uint64) ([]string, error) {
	if n > uint64(len(u.b)) { // each value takes at least a byte
		return nil, errPacked
	}
	for range n {
		v, err := u.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func pairsMap(flat []string) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[flat[i]] = flat[i+1]
	}
	return m
}

// unpackRun reads a run packed by lib/pack.lua.
func unpackRun(b []byte) (*packedRun, error) {
	if len(b) == 0 || b[0] != 1 || len(packDict) == 0 {
		return nil, fmt.Errorf("%w: unknown version", errPacked)
	}
	u := &unpacker{b: b[1:], texts: append([]string(nil), packDict...)}
	base, err := u.varint()
	if err != nil {
		return nil, err
	}
	u.base = int64(base)
	run, err := u.record()
	if err != nil {
		return nil, err
	}
	out := &packedRun{Run: pairsMap(run)}
	n, err := u.varint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(u.b)) {
		return nil, errPacked
	}
	for range n {
		node, err := u.record()
		if err != nil {
			return nil, err
		}
		out.Nodes = append(out.Nodes, pairsMap(node))
	}
	if n, err = u.varint(); err != nil {
		return nil, err
	}
	if n > uint64(len(u.b)) {
		return nil, errPacked
	}
	for range n {
		ms, err := u.varint()
		if err != nil {
			return nil, err
		}
		seq, err := u.varint()
		if err != nil {
			return nil, err
		}
		flat, err := u.event()
		if err != nil {
			return nil, err
		}
		values := make(map[string]any, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			values[flat[i]] = flat[i+1]
		}
		out.Events = append(out.Events, redis.XMessage{
			ID: strconv.FormatInt(u.base+unzigzag(ms), 10) + "-" + strconv.FormatUint(seq, 10), Values: values})
	}
	if len(u.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left over", errPacked, len(u.b))
	}
	return out, nil
}

// packedOf reads a run that is packed into one key: nil and no error when
// it is not (it is live, kept as hashes and a stream, or gone).
func (s *Store) packedOf(ctx context.Context, thread, run string) (*packedRun, error) {
	raw, err := s.rdb.Get(ctx, s.keys.Packed(thread, run)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	p, err := unpackRun(raw)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	return p, nil
}

// nodeOrNil returns the packed node id, from the run's node list; nil
// when p is nil or has no such node.
func (p *packedRun) nodeOrNil(id string) map[string]string {
	if p == nil {
		return nil
	}
	var ids []string
	_ = json.Unmarshal([]byte(p.Run["nodes"]), &ids)
	for i, n := range ids {
		if n == id && i < len(p.Nodes) {
			return p.Nodes[i]
		}
	}
	return nil
}

// eventsAfter is the packed run's events after the stream id after (""
// or "0": all), at most count of them (count <= 0: all), as XRANGE reads
// them from a stream.
func (p *packedRun) eventsAfter(after string, count int64) []redis.XMessage {
	out := p.Events
	if after != "" && after != "0" {
		from := len(out)
		for i, m := range out {
			if streamIDLess(after, m.ID) {
				from = i
				break
			}
		}
		out = out[from:]
	}
	if count > 0 && int64(len(out)) > count {
		out = out[:count]
	}
	return out
}

// streamIDLess says whether stream id a ("ms-seq", or "ms") comes before b.
func streamIDLess(a, b string) bool {
	split := func(id string) (uint64, uint64) {
		ms, seq, _ := strings.Cut(id, "-")
		m, _ := strconv.ParseUint(ms, 10, 64)
		q, _ := strconv.ParseUint(seq, 10, 64)
		return m, q
	}
	am, aq := split(a)
	bm, bq := split(b)
	return am < bm || (am == bm && aq < bq)
}

// packedFence answers a write under l whose script found no node hash
// (ErrNotFound; err wraps it) when l's run is packed into one key:
// packed_fence.lua answers as op's fence check would from the node's
// stored epoch and claim, recording a refusal as a stale_rejected event as
// before the run was packed. replay says the write is a commit of the
// claim that committed the node (its reply was lost). err is returned
// unchanged when it is not ErrNotFound or the run is not packed; the
// script's refusal replaces ErrNotFound in err's text otherwise.
func (s *Store) packedFence(ctx context.Context, l Lease, op string, err error, extra ...any) (replay bool, _ error) {
	answer, err := s.packedAnswer(ctx, l, op, err, extra...)
	return answer != nil, err
}

// packedAnswer is packedFence for fail, release and park, whose own
// answer a replay must get again: when l's claim ended the packed node's
// attempt by op (a lost reply, then the run ended and was packed), it
// returns the reply op's script gave the first time, for the caller to
// read as its own; for a commit of the claim that committed the node, a
// non-nil answer with nothing in it.
func (s *Store) packedAnswer(ctx context.Context, l Lease, op string, err error, extra ...any) (answer any, _ error) {
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	args := append([]any{op, l.Node, l.Owner, l.Epoch, l.ClaimID, s.maxlen}, extra...)
	v, ferr := s.run(ctx, "packed_fence", []string{s.keys.Packed(l.Thread, l.Run), s.keys.Events(l.Thread, l.Run)}, args...)
	if ferr != nil {
		return nil, err // the write's own answer stands; a retry asks again
	}
	code, r, ferr := reply(v)
	switch {
	case code == 2 && len(r) > 0:
		return r, nil
	case code == 2:
		return v, nil
	case errors.Is(ferr, ErrNotFound) || ferr == nil:
		return nil, err
	}
	msg, _ := strings.CutSuffix(err.Error(), ErrNotFound.Error())
	return nil, fmt.Errorf("%s%w", msg, ferr)
}
