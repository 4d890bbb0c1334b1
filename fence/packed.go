package fence

import (
	"encoding/hex"
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
