package agentapi

import (
	"encoding/json"
	"net/http"
)

// writeJSON writes v as the response's JSON body with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers an error as LangGraph's server does: {"detail": msg}.
// (Helpers: check the reference server's exact bodies per status, and
// change this one place if they differ.)
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"detail": msg})
}
