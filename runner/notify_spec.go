package runner

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/batonrun/baton/fence"
)

// Notify is a run's completion webhook: once the run has ended, a
// runner POSTs its outcome to URL, signed (see Notifier).
//
//	"notify": {"url": "https://hooks.example.com/baton"}
type Notify struct {
	// URL receives the POST: http or https, at most MaxNotifyURLBytes.
	URL string `json:"url" yaml:"url"`
}

// MaxNotifyURLBytes caps a webhook URL.
const MaxNotifyURLBytes = 2048

var notifyFields = []string{"url"}

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

// notify reads a spec's notify object.
func (d *specDecoder) notify(path string, v *value) *Notify {
	if v == nil || v.kind == vNull {
		return nil
	}
	if v.kind != vObject {
		d.wrongType(path, v, `an object such as {"url": "https://hooks.example.com/baton"}`)
		return nil
	}
	f := d.fields(v, path, notifyFields)
	return &Notify{URL: d.str(path+".url", f["url"])}
}

// armNotify records the spec's webhook before the run is stored, so that
// no run that ends is missed (fence.ArmNotify). The returned disarm undoes
// a record it created when the store refused the run for good (a conflict
// or a busy thread); after any other error the run may have been stored,
// so the record stays (a pending entry whose run never appears is dropped
// after a while).
func (c *Client) armNotify(ctx context.Context, spec *RunSpec, run string) (func(context.Context, error), error) {
	none := func(context.Context, error) {}
	if spec.Notify == nil {
		return none, nil
	}
	thread := cmp.Or(spec.Thread, run)
	created, err := c.store.ArmNotify(ctx, thread, run, spec.Notify.URL)
	if err != nil || !created {
		return none, err
	}
	return func(ctx context.Context, err error) {
		if !errors.Is(err, fence.ErrRunConflict) && !errors.Is(err, fence.ErrThreadBusy) {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = c.store.DisarmNotify(dctx, thread, run)
	}, nil
}
