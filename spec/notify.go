package spec

import (
	"net/url"
	"strconv"
)

// Notify is a run's completion webhook: once the run has ended, a
// runner POSTs its outcome to URL, signed (see runner.Notifier).
//
//	"notify": {"url": "https://hooks.example.com/baton"}
type Notify struct {
	// URL receives the POST: http or https, at most MaxNotifyURLBytes.
	URL string `json:"url" yaml:"url"`
}

// MaxNotifyURLBytes caps a webhook URL.
const MaxNotifyURLBytes = 2048

// check files every problem of a spec's notify under its field.
func (n *Notify) check(bad func(field, format string, a ...any)) {
	if n == nil {
		return
	}
	const field = "notify.url"
	switch {
	case n.URL == "":
		bad(field, "missing: want an http or https URL such as \"https://hooks.example.com/baton\"")
		return
	case len(n.URL) > MaxNotifyURLBytes:
		bad(field, "%d bytes, at most %d", len(n.URL), MaxNotifyURLBytes)
		return
	}
	u, err := url.Parse(n.URL)
	switch {
	case err != nil:
		bad(field, "%s is not a URL", quote(n.URL))
	case u.Scheme != "http" && u.Scheme != "https":
		bad(field, "scheme %s: want http or https", strconv.Quote(u.Scheme))
	case u.Host == "":
		bad(field, "%s has no host", quote(n.URL))
	case u.User != nil:
		bad(field, "no user:password in the URL: the payload is signed instead (WEBHOOK_SECRET)")
	}
}

// url is the webhook's URL, "" for none.
func (n *Notify) url() string {
	if n == nil {
		return ""
	}
	return n.URL
}
