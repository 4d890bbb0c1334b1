package agentapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// The store routes: LangGraph's BaseStore over HTTP, on the same Redis
// keys the graph workers hand to graphs as their store (fence's item
// store; python/baton_langgraph/store.py, js/src/store.js).

// storeRoutes registers the routes of this group.
func (s *Server) storeRoutes() {
	s.mux.HandleFunc("PUT /store/items", s.putItem)
	s.mux.HandleFunc("GET /store/items", s.getItem)
	s.mux.HandleFunc("DELETE /store/items", s.deleteItem)
	s.mux.HandleFunc("POST /store/items/search", s.searchItems)
	s.mux.HandleFunc("POST /store/namespaces", s.listNamespaces)
}

// apiItem is an item as the API shows one (the reference's mapItemsToApi).
type apiItem struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

// storeISO writes a time as JavaScript's Date.toISOString does.
func storeISO(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func toAPIItem(it fence.Item) apiItem {
	return apiItem{Namespace: it.Namespace, Key: it.Key, Value: it.Value,
		CreatedAt: storeISO(it.CreatedAt), UpdatedAt: storeISO(it.UpdatedAt)}
}

// storeDecode reads a JSON body into v; a problem is a message naming the
// field, for a 422.
func storeDecode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: expected %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	return nil
}

// storeError answers an error of the item store: bad input names what is
// wrong (422), anything else is the server's (500).
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, fence.ErrInvalidNamespace), errors.Is(err, fence.ErrInvalidItem):
		msg := err.Error()
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, "fence: invalid namespace: "), "fence: invalid item: ")
		writeError(w, http.StatusUnprocessableEntity, msg)
	default:
		s.log.ErrorContext(r.Context(), "store_failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "store: "+err.Error())
	}
}

// namespaceRequired answers the reference's 400 for a write with no
// namespace.
func namespaceRequired(w http.ResponseWriter, ns []string) bool {
	if len(ns) == 0 {
		writeError(w, http.StatusBadRequest, "Namespace is required")
		return true
	}
	return false
}

func (s *Server) putItem(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Namespace []string        `json:"namespace"`
		Key       *string         `json:"key"`
		Value     json.RawMessage `json:"value"`
		Index     json.RawMessage `json:"index"`
		TTL       *float64        `json:"ttl"`
	}
	if err := storeDecode(r, &body); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if namespaceRequired(w, body.Namespace) {
		return
	}
	if body.Key == nil {
		writeError(w, http.StatusUnprocessableEntity, "key: required")
		return
	}
	if v := bytes.TrimSpace(body.Value); len(v) == 0 || v[0] != '{' {
		writeError(w, http.StatusUnprocessableEntity, "value: expected an object")
		return
	}
	wr := fence.ItemWrite{Namespace: body.Namespace, Key: *body.Key, Value: body.Value}
	if body.TTL != nil && *body.TTL > 0 {
		wr.TTL = time.Duration(*body.TTL * float64(time.Minute)) // minutes, as LangGraph's
	}
	if err := s.cfg.Client.Store().PutItems(r.Context(), []fence.ItemWrite{wr}); err != nil {
		s.storeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteItem(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Namespace []string `json:"namespace"`
		Key       *string  `json:"key"`
	}
	if err := storeDecode(r, &body); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if namespaceRequired(w, body.Namespace) {
		return
	}
	if body.Key == nil {
		writeError(w, http.StatusUnprocessableEntity, "key: required")
		return
	}
	if err := fence.ValidateNamespace(body.Namespace, false); err != nil {
		s.storeError(w, r, err)
		return
	}
	if err := s.cfg.Client.Store().PutItems(r.Context(), []fence.ItemWrite{{Namespace: body.Namespace, Key: *body.Key}}); err != nil {
		s.storeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getItem answers the item, or null (200) when there is none, as the
// reference does.
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("key") {
		writeError(w, http.StatusUnprocessableEntity, "key: required")
		return
	}
	var ns []string
	if v := q.Get("namespace"); v != "" {
		ns = strings.Split(v, ".")
	}
	refresh := true // LangGraph's default: a read restarts the item's ttl
	if v := q.Get("refresh_ttl"); v != "" {
		l := strings.ToLower(v)
		refresh = l == "true" || l == "1" || l == "yes"
	}
	it, err := s.cfg.Client.Store().GetItem(r.Context(), ns, q.Get("key"), refresh)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if it == nil {
		writeJSON(w, http.StatusOK, nil)
		return
	}
	writeJSON(w, http.StatusOK, toAPIItem(*it))
}

func (s *Server) searchItems(w http.ResponseWriter, r *http.Request) {
	var body struct {
		NamespacePrefix []string       `json:"namespace_prefix"`
		Filter          map[string]any `json:"filter"`
		Limit           *int           `json:"limit"`
		Offset          *int           `json:"offset"`
		Query           *string        `json:"query"`
		RefreshTTL      *bool          `json:"refresh_ttl"`
	}
	if err := storeDecode(r, &body); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	q := fence.ItemSearch{Prefix: body.NamespacePrefix, Filter: body.Filter, Limit: 10, Refresh: true}
	if body.Limit != nil {
		if *body.Limit < 0 {
			writeError(w, http.StatusUnprocessableEntity, "limit: must be at least 0")
			return
		}
		q.Limit = *body.Limit
	}
	if body.Offset != nil {
		if *body.Offset < 0 {
			writeError(w, http.StatusUnprocessableEntity, "offset: must be at least 0")
			return
		}
		q.Offset = *body.Offset
	}
	if body.RefreshTTL != nil {
		q.Refresh = *body.RefreshTTL
	}
	items := []apiItem{}
	if q.Limit > 0 {
		found, err := s.cfg.Client.Store().SearchItems(r.Context(), q)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		for _, it := range found {
			items = append(items, toAPIItem(it))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prefix   []string `json:"prefix"`
		Suffix   []string `json:"suffix"`
		MaxDepth *int     `json:"max_depth"`
		Limit    *int     `json:"limit"`
		Offset   *int     `json:"offset"`
	}
	if err := storeDecode(r, &body); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	q := fence.NamespaceQuery{Prefix: body.Prefix, Suffix: body.Suffix, Limit: 100}
	for _, p := range []struct {
		name string
		v    *int
		dst  *int
	}{{"max_depth", body.MaxDepth, &q.MaxDepth}, {"limit", body.Limit, &q.Limit}, {"offset", body.Offset, &q.Offset}} {
		if p.v == nil {
			continue
		}
		if *p.v < 0 {
			writeError(w, http.StatusUnprocessableEntity, p.name+": must be at least 0")
			return
		}
		*p.dst = *p.v
	}
	out := [][]string{}
	if q.Limit > 0 {
		found, err := s.cfg.Client.Store().ListNamespaces(r.Context(), q)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		out = append(out, found...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": out})
}
