package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseJSON reads a spec document in JSON. Invalid JSON is one problem at
// its line and column; nothing falls through to YAML. hint, if set, is
// added to that problem (why the text was read as JSON).
func parseJSON(data []byte, hint string) (*value, error) {
	if !json.Valid(data) {
		return nil, jsonSyntaxError(data, hint)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &jsonParser{dec: dec, data: data, pos: lineCounter{data: data, line: 1}}
	v, err := p.value(roleRoot)
	if err != nil { // not reached: the text is valid JSON
		return nil, &Error{Field: "spec", Msg: "not valid JSON: " + err.Error()}
	}
	return v, nil
}

// jsonParser builds values from encoding/json's tokens, with the position
// each starts at.
type jsonParser struct {
	dec  *json.Decoder
	data []byte
	pos  lineCounter
}

// next is the offset of the next token: the decoder's offset past the
// separators it consumes with that token.
func (p *jsonParser) next() int {
	off := int(p.dec.InputOffset())
	for off < len(p.data) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *jsonParser) value(r role) (*value, error) {
	v := &value{}
	v.line, v.col = p.pos.at(p.next())
	if r == roleOpaque {
		v.opaque = true
		if err := p.dec.Decode(&v.raw); err != nil {
			return nil, err
		}
		return v, nil
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v.kind = vObject
			for p.dec.More() {
				m := member{}
				m.line, m.col = p.pos.at(p.next())
				k, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				m.key, _ = k.(string)
				if m.val, err = p.value(r.member(m.key)); err != nil {
					return nil, err
				}
				v.members = append(v.members, m)
			}
		} else {
			v.kind = vList
			for p.dec.More() {
				e, err := p.value(r.elem())
				if err != nil {
					return nil, err
				}
				v.list = append(v.list, e)
			}
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		v.kind, v.text = vString, t
	case json.Number:
		v.kind, v.text, v.num = vNumber, string(t), string(t)
	case bool:
		v.kind, v.text = vBool, "false"
		if t {
			v.text = "true"
		}
	case nil:
		v.kind, v.text = vNull, "null"
	}
	return v, nil
}

// jsonSyntaxError locates what makes data invalid JSON.
func jsonSyntaxError(data []byte, hint string) error {
	var se *json.SyntaxError
	if err := json.Unmarshal(data, new(struct{})); !errors.As(err, &se) {
		return &Error{Field: "spec", Msg: "not valid JSON" + hint}
	}
	msg := se.Error()
	off := int(se.Offset) - 1 // Offset counts the bytes read, the bad one included
	switch {
	case strings.HasPrefix(msg, "unexpected end of JSON input"):
		off, msg = len(data), "unexpected end of input"
	case strings.HasSuffix(msg, "exceeded max depth"):
		msg = "nested more than 10000 levels deep"
	}
	off = max(0, min(off, len(data)))
	if off < len(data) && (data[off] == '}' || data[off] == ']') {
		prev := bytes.TrimRight(data[:off], " \t\r\n")
		if len(prev) > 0 && prev[len(prev)-1] == ',' {
			msg = "trailing comma before '" + string(data[off]) + "' (JSON allows none)"
		}
	}
	lc := lineCounter{data: data, line: 1}
	line, col := lc.at(off)
	return &Error{Field: "spec", Msg: "invalid JSON: " + msg + posText(line, col) + hint}
}

// posText is where a problem is, for its message: " (line 3, column 7)",
// or " (line 3)" when the column is unknown.
func posText(line, col int) string {
	if col == 0 {
		return " (line " + strconv.Itoa(line) + ")"
	}
	return " (line " + strconv.Itoa(line) + ", column " + strconv.Itoa(col) + ")"
}

// lineCounter turns byte offsets, asked for in increasing order, into
// 1-based lines and columns, counting a column per character.
type lineCounter struct {
	data      []byte
	off, line int
	col       int // characters since the line's start
}

func (c *lineCounter) at(off int) (line, col int) {
	for c.off < off && c.off < len(c.data) {
		r, size := utf8.DecodeRune(c.data[c.off:])
		if r == '\n' {
			c.line++
			c.col = 0
		} else {
			c.col++
		}
		c.off += size
	}
	return c.line, c.col + 1
}
