package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseYAML reads a spec document in YAML: one document, with empty ones
// ("---" alone) allowed around it.
func parseYAML(data []byte) (*value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc *yaml.Node
	for {
		n := new(yaml.Node)
		err := dec.Decode(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			msg, line := yamlMessage(err)
			if line > 0 {
				msg += posText(line, 0)
			}
			return nil, &Error{Field: "spec", Msg: msg}
		}
		if emptyDocument(n) {
			continue
		}
		if doc != nil {
			return nil, &Error{Field: "spec", Msg: fmt.Sprintf("a second YAML document at line %d; a spec is one document", n.Line)}
		}
		doc = n
	}
	if doc == nil {
		return nil, &Error{Field: "spec", Msg: "empty"}
	}
	c := yamlConv{memo: map[yamlKey]*value{}}
	return c.value(doc, roleRoot), nil
}

func emptyDocument(n *yaml.Node) bool {
	if len(n.Content) == 0 {
		return true
	}
	c := n.Content[0]
	return c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" && c.Value == "" && c.Anchor == ""
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlMessage rewords a YAML library error: no "yaml:" prefix, on one
// line, bounded in size. line is the line the first part names, taken out
// of the text; 0 if none.
func yamlMessage(err error) (msg string, line int) {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "yaml:"))
		if l == "" || l == "unmarshal errors:" {
			continue
		}
		if m := yamlLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			if line == 0 && len(parts) == 0 {
				line, l = n, l[len(m[0]):]
			} else {
				l = l[len(m[0]):] + " (line " + m[1] + ")"
			}
		}
		if strings.HasPrefix(l, "invalid map key") {
			l = "a key must be a string, a number or a boolean" // the library's text names Go types
		}
		parts = append(parts, l)
	}
	msg = strings.Join(parts, "; ")
	if len(msg) > 300 {
		msg = quote(msg)
	}
	return msg, line
}

// yamlKey memoizes a YAML node's value per role, so that an alias shares
// its anchor's value instead of copying it.
type yamlKey struct {
	n *yaml.Node
	r role
}

// maxMerged bounds the keys merge keys ("<<: *base") copy in all.
const maxMerged = 1 << 20

type yamlConv struct {
	memo   map[yamlKey]*value
	merged int
}

// resolve follows aliases and documents to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && i < 100; i++ {
		switch {
		case n.Kind == yaml.AliasNode && n.Alias != nil:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) > 0:
			n = n.Content[0]
		default:
			return n
		}
	}
	return n
}

func (c *yamlConv) value(n *yaml.Node, r role) *value {
	at := n
	n = resolve(n)
	if n == nil || n.Kind == yaml.AliasNode || n.Kind == yaml.DocumentNode {
		return &value{kind: vNull, text: "null", line: at.Line, col: at.Column}
	}
	k := yamlKey{n, r}
	if v, ok := c.memo[k]; ok {
		return v
	}
	v := &value{line: n.Line, col: n.Column}
	c.memo[k] = v
	if r == roleOpaque {
		v.opaque, v.yaml = true, n
		return v
	}
	switch n.Kind {
	case yaml.ScalarNode:
		scalar(v, n)
	case yaml.SequenceNode:
		v.kind = vList
		v.list = make([]*value, 0, len(n.Content))
		for _, e := range n.Content {
			v.list = append(v.list, c.value(e, r.elem()))
		}
	case yaml.MappingNode:
		v.kind = vObject
		c.mapping(v, n, r)
	}
	return v
}

// mapping fills an object's members, applying merge keys the way YAML
// decoders do: keys written in the mapping win, then earlier merges.
func (c *yamlConv) mapping(v *value, n *yaml.Node, r role) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		m := member{line: kn.Line, col: kn.Column}
		key := resolve(kn)
		switch {
		case key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge":
			if len(merges) > 0 {
				m.key, m.bad = "<<", "a second merge key; list the mappings to merge in one: <<: [*a, *b]"
				v.members = append(v.members, m)
			}
			merges = append(merges, vn)
			continue
		case key.Kind != yaml.ScalarNode:
			m.key, m.bad = "?", "a key must be a string"
			v.members = append(v.members, m)
			continue
		}
		m.key = key.Value
		m.val = c.value(vn, r.member(m.key))
		v.members = append(v.members, m)
	}
	if len(merges) == 0 {
		return
	}
	have := make(map[string]bool, len(v.members))
	for _, m := range v.members {
		have[m.key] = true
	}
	for _, mn := range merges {
		srcs := []*yaml.Node{mn}
		if s := resolve(mn); s.Kind == yaml.SequenceNode {
			srcs = s.Content
		}
		for _, src := range srcs {
			if rs := resolve(src); rs.Kind != yaml.MappingNode {
				v.members = append(v.members, member{key: "<<", line: src.Line, col: src.Column,
					bad: "merge key: want a mapping or a list of mappings"})
				continue
			}
			sv := c.value(src, r)
			for _, m := range sv.members {
				if have[m.key] || m.bad != "" {
					continue
				}
				if c.merged++; c.merged > maxMerged {
					v.members = append(v.members, member{key: "<<", line: src.Line, col: src.Column,
						bad: fmt.Sprintf("merge keys copy more than %d keys in all", maxMerged)})
					return
				}
				have[m.key] = true
				v.members = append(v.members, m)
			}
		}
	}
}

// scalar sets a scalar's kind by its YAML tag. Timestamps are read as the
// strings they are written as: a date-like id stays an id.
func scalar(v *value, n *yaml.Node) {
	v.text = n.Value
	switch tag := n.ShortTag(); tag {
	case "!!null":
		v.kind = vNull
	case "!!bool":
		v.kind = vBool
	case "!!str", "!!timestamp":
		v.kind = vString
	case "!!int", "!!float":
		var x any
		if err := n.Decode(&x); err != nil {
			v.kind, v.tag = vOther, tag
			return
		}
		v.kind = vNumber
		switch x := x.(type) {
		case int:
			v.num = strconv.Itoa(x)
		case int64:
			v.num = strconv.FormatInt(x, 10)
		case uint64:
			v.num = strconv.FormatUint(x, 10)
		case float64:
			v.num = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			v.kind, v.tag = vOther, tag
		}
	default:
		v.kind, v.tag = vOther, tag
	}
}

// yamlToJSON turns a node's YAML input into JSON; msg is set when it has
// no JSON form, line when the YAML library said where.
func yamlToJSON(n *yaml.Node) (raw json.RawMessage, msg string, line int) {
	var v any
	if err := n.Decode(&v); err != nil {
		msg, line = yamlMessage(err)
		return nil, msg, line
	}
	b, err := json.Marshal(normalizeYAML(v))
	if err != nil {
		if badNumber(v) {
			return nil, "holds .inf or .nan, which JSON cannot represent", 0
		}
		return nil, "has no JSON form", 0
	}
	return b, "", 0
}

// badNumber reports whether v holds an infinite or NaN float.
func badNumber(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsInf(x, 0) || math.IsNaN(x)
	case map[string]any:
		for _, e := range x {
			if badNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if badNumber(e) {
				return true
			}
		}
	}
	return false
}

// normalizeYAML turns YAML maps into JSON-encodable ones.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	}
	return v
}
