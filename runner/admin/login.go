package admin

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// login lets a person open the UI when a token is required: GET shows a
// form, POST checks the token and sets an HttpOnly, SameSite=Strict
// session cookie (session.go), then sends the browser where it was going.
// A wrong token shows the form again, with a message; wrong tokens count
// against the client as on the API (throttle.go).
type login struct {
	guard guard
	ui    *ui
	// forwardedAny trusts X-Forwarded-Proto from any peer
	// (Config.TrustForwardedProto); guard.proxies from theirs only.
	forwardedAny bool
}

type loginData struct {
	Next, Error string
}

func (l login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		l.ui.render(w, r, http.StatusOK, "login", "page", page{Title: "Log in", Bare: true, Data: loginData{Next: localPath(r.URL.Query().Get("next"))}})
	case http.MethodPost:
		client := l.guard.proxies.client(r)
		if wait, ok := l.guard.throttle.allowed(client); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			l.ui.render(w, r, http.StatusTooManyRequests, "login", "page", page{Title: "Log in", Bare: true,
				Data: loginData{Error: "Too many wrong tokens from " + client + ": try again in " + strconv.Itoa(wait) + "s."}})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		tok := r.PostFormValue("token")
		next := localPath(r.PostFormValue("next"))
		sum := sha256.Sum256([]byte(tok))
		if tok == "" || subtle.ConstantTimeCompare(sum[:], l.guard.want[:]) != 1 {
			msg := "That token is not this server's API token."
			if tok == "" {
				msg = "Enter the API token (API_TOKEN) to log in."
			} else {
				l.guard.throttle.refused(client, func(n int) {
					l.guard.log.Warn("login_refused", "client", client, "refused", n)
				})
			}
			l.ui.render(w, r, http.StatusUnauthorized, "login", "page", page{Title: "Log in", Bare: true, Data: loginData{Next: next, Error: msg}})
			return
		}
		val, exp := l.guard.sessions.issue()
		id, _ := l.guard.sessions.check(val)
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: val, Path: "/", HttpOnly: true,
			Secure: l.secure(r), SameSite: http.SameSiteStrictMode, Expires: exp, MaxAge: int(time.Until(exp).Seconds())})
		l.guard.log.Info("login", "client", client, "session", id)
		http.Redirect(w, r, cmp.Or(next, "/runs"), http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// logout clears the session cookie. The value itself stays valid until it
// expires (sessions are stateless); rotate the token to end them all.
func (l login) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: l.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// secure reports whether the browser reached this server over TLS: this
// server terminated it, or a trusted proxy in front says it did.
func (l login) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	https := strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
	return https && (l.forwardedAny || l.guard.proxies.trusted(r.RemoteAddr))
}

// localPath keeps next only if it parses as a path on this server
// ("/runs/x?status=FAILED"), so that the login cannot send a browser
// elsewhere. Browsers drop tabs and newlines from a URL and read a
// backslash as a slash, so "/\t/evil.example" and "/\evil.example" would
// both become "//evil.example", another host: any control character,
// space or backslash refuses next, and so does anything that parses with
// a scheme, a host or user info, or does not start with a single slash.
func localPath(next string) string {
	if next == "" || strings.ContainsFunc(next, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return ""
	}
	return u.RequestURI()
}
