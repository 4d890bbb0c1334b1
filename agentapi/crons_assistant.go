package agentapi

import (
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"strings"
)

// The cron routes' own resolver of assistant ids: a graph id, or a graph's
// default assistant (uuid5 of the graph id, as the reference derives it).

// cronGraphNS is the namespace of default assistants' ids (the
// reference's NAMESPACE_GRAPH): a graph's default assistant is
// uuid5(cronGraphNS, graph id).
var cronGraphNS = [16]byte{0x6b, 0xa7, 0xb8, 0x21, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// cronUUID5 is RFC 9562's name-based UUID (SHA-1) of name in ns.
func cronUUID5(ns [16]byte, name string) string {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return cronFormatUUID(u)
}

func cronUUID4() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return cronFormatUUID(u)
}

func cronFormatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// cronIsUUID says whether id is a UUID in its canonical text.
func cronIsUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, r := range id {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if r != '-' {
				return false
			}
		} else if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// cronAssistant resolves an assistant id, or a graph id given in its
// place, to the graph it runs and the assistant's id. It knows the
// default assistants (one per graph, uuid5 of the graph id); assistants
// created through /assistants are not resolved here.
func (s *Server) cronAssistant(id string) (graph, assistantID string, ok bool) {
	for _, g := range s.cfg.Graphs.IDs() {
		if id == g || strings.EqualFold(id, cronUUID5(cronGraphNS, g)) {
			return g, cronUUID5(cronGraphNS, g), true
		}
	}
	return "", "", false
}
