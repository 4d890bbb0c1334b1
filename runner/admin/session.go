package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// sessionCookie holds a browser's session on the UI: never the API token
// itself, so a leaked cookie (a proxy log, a shared browser profile) does
// not hand out the token, and it stops working on its own.
const sessionCookie = "baton_session"

// DefaultSessionTTL is how long a login lasts when Config.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

// sessions issues and checks session values. A value is
// "v1.<expiry unix>.<random id>.<mac>", the mac an HMAC-SHA256 of the rest
// under a key derived from the API token. So every runner of a fleet that
// shares the token accepts a session any of them issued, with no shared
// session store, and rotating the token revokes every session.
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

func newSessions(token string, ttl time.Duration) sessions {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("baton admin session key v1"))
	return sessions{key: m.Sum(nil), ttl: ttl, now: time.Now}
}

func (s sessions) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue returns a new session value and when it expires.
func (s sessions) issue() (string, time.Time) {
	exp := s.now().Add(s.ttl).Truncate(time.Second)
	id := make([]byte, 16)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	payload := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(id)
	return payload + "." + s.mac(payload), exp
}

// valid reports whether v is a session this token issued that has not
// expired.
func (s sessions) valid(v string) bool {
	_, ok := s.check(v)
	return ok
}

// check is valid that also returns the session's random id, which names
// one login in audit lines without being usable as the cookie.
func (s sessions) check(v string) (string, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !strings.HasPrefix(v, "v1.") {
		return "", false
	}
	payload, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return "", false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 3 {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !s.now().Before(time.Unix(exp, 0)) {
		return "", false
	}
	return parts[2], true
}
