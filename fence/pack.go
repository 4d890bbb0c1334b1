package fence

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// packer writes a finished run in scripts/lua/lib/pack.lua's layout,
// value for value as the script encodes it, so that unpackRun and
// lib/unpack.lua read either alike. The retention sweep packs here and
// retain.lua only checks that the run is still what was read: encoding in
// Lua cost Redis about 45 µs of its one thread per run, more than the
// commit that ended it (docs/performance.md).
type packer struct {
	out  []byte
	met  map[string]int // text -> its index in the table, for texts past packDict's
	next int
	base int64
}

// packDictIndex is packDict's text -> its first index.
var packDictIndex = func() map[string]int {
	m := make(map[string]int, len(packDict))
	for i, v := range packDict {
		if _, ok := m[v]; !ok {
			m[v] = i
		}
	}
	return m
}()

func newPacker(base int64) *packer {
	return &packer{out: make([]byte, 0, 256), met: make(map[string]int, 16), next: len(packDict), base: base}
}

func (p *packer) varint(n uint64) {
	for n >= 0x80 {
		p.out = append(p.out, byte(n)|0x80)
		n >>= 7
	}
	p.out = append(p.out, byte(n))
}

func zigzag(n int64) uint64 {
	if n < 0 {
		return uint64(-n)*2 - 1
	}
	return uint64(n) * 2
}

// decimal reports whether v is an integer as pack.lua stores one in
// place: "0", or an optional "-" and digits without a leading zero.
func decimal(v string) bool {
	if v == "0" {
		return true
	}
	d := strings.TrimPrefix(v, "-")
	if d == "" || d[0] == '0' {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

func lowerHex(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (p *packer) value(v string) {
	i, ok := packDictIndex[v]
	if !ok {
		i, ok = p.met[v]
	}
	if ok {
		p.varint(uint64(i)*2 + 1)
		return
	}
	n := len(v)
	if n <= 15 && decimal(v) {
		x, _ := strconv.ParseInt(v, 10, 64) // 15 digits at most
		if x >= 1e12 && p.base > 0 {
			p.varint((zigzag(x-p.base)*4 + 3) * 2)
		} else {
			p.varint((zigzag(x)*4 + 2) * 2)
		}
		return
	}
	if n >= 8 && n%2 == 0 && lowerHex(v) {
		p.varint(uint64(n/2*4+1) * 2)
		raw, _ := hex.DecodeString(v)
		p.out = append(p.out, raw...)
	} else {
		p.varint(uint64(n) * 8)
		p.out = append(p.out, v...)
	}
	p.met[v] = p.next
	p.next++
}

// record appends a hash's fields but those in drop, in no set order (a
// hash has none).
func (p *packer) record(h map[string]string, drop map[string]bool) {
	n := len(h)
	for k := range drop {
		if _, ok := h[k]; ok {
			n--
		}
	}
	p.varint(uint64(n))
	for k, v := range h {
		if !drop[k] {
			p.value(k)
			p.value(v)
		}
	}
}

// streamEntry is one event stream entry as XRANGE returns it, its fields
// in order.
type streamEntry struct {
	ID   string
	Flat []string // names and values
}

func (p *packer) event(flat []string) {
	usual := len(flat) >= 10
	for i, name := range eventFields {
		if usual && flat[2*i] != name {
			usual = false
		}
	}
	if !usual {
		p.varint(uint64(len(flat)))
		for _, v := range flat {
			p.value(v)
		}
		return
	}
	p.varint(uint64(len(flat) - 10 + 1))
	for i := range eventFields {
		p.value(flat[2*i+1])
	}
	for _, v := range flat[10:] {
		p.value(v)
	}
}

// What retention drops from a SUCCEEDED run's hashes (lib/retain_run.lua
// slimSucceeded, the sweep's list).
var (
	slimRun  = map[string]bool{"id": true, "thread": true, "failed": true, "cancel": true, "updated_at": true}
	slimNode = map[string]bool{"id": true, "run": true, "thread": true, "remaining": true, "lease_until": true,
		"heartbeat_at": true, "end_op": true, "ready_at": true, "inc": true, "progress": true, "updated_at": true,
		"created_at": true}
)

// packRun packs a finished run read from its keys as retain.lua would,
// slimming a SUCCEEDED one first. It reports false for an entry id it
// cannot read (then the script packs the run itself).
func packRun(run map[string]string, nodes []map[string]string, events []streamEntry) ([]byte, bool) {
	base, err := strconv.ParseInt(run["created_at"], 10, 64)
	if err != nil {
		base = 0
	}
	runDrop, nodeDrop := map[string]bool(nil), map[string]bool(nil)
	if run["status"] == "SUCCEEDED" {
		runDrop, nodeDrop = slimRun, slimNode
	}
	p := newPacker(base)
	p.out = append(p.out, 1)
	p.varint(uint64(max(base, 0)))
	p.record(run, runDrop)
	p.varint(uint64(len(nodes)))
	for _, n := range nodes {
		p.record(n, nodeDrop)
	}
	p.varint(uint64(len(events)))
	for _, e := range events {
		msS, seqS, ok := strings.Cut(e.ID, "-")
		ms, err1 := strconv.ParseInt(msS, 10, 64)
		seq, err2 := strconv.ParseUint(seqS, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, false
		}
		p.varint(zigzag(ms - base))
		p.varint(seq)
		p.event(e.Flat)
	}
	return p.out, true
}
