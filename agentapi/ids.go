package agentapi

import "github.com/google/uuid"

// The API's ids are UUIDs, as the reference server's: a UUID is a valid
// baton ID, so it may become part of a key; nothing else the API names
// does.

// namespaceGraph is the reference server's NAMESPACE_GRAPH: a graph's
// default assistant is uuid5(namespaceGraph, graph id), so an id an SDK
// learnt from LangGraph's server names the same assistant here.
var namespaceGraph = uuid.MustParse("6ba7b821-9dad-11d1-80b4-00c04fd430c8")

// DefaultAssistantID is the id of a graph's default assistant.
func DefaultAssistantID(graphID string) string {
	return uuid.NewSHA1(namespaceGraph, []byte(graphID)).String()
}

// newID returns a random (version 4) UUID, the ids the API makes: runs,
// threads, assistants, crons.
func newID() string { return uuid.NewString() }

// isUUID reports whether s is a UUID in its canonical text form (any
// version, either case), as the reference server's schemas require of
// thread, assistant, run and checkpoint ids.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false // uuid.Parse also takes braces, urn: and no dashes
	}
	_, err := uuid.Parse(s)
	return err == nil
}
