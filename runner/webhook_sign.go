package runner

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Webhook signatures, Stripe's scheme: the HMAC-SHA256 of "<t>.<body>"
// keyed with the shared secret, t in unix seconds so that a receiver can
// refuse a replay.

// SignWebhook is the Baton-Signature header for body sent at t.
func SignWebhook(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + webhookMAC(secret, ts, body)
}

func webhookMAC(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by VerifyWebhook for a delivery that was not
// signed with the secret, or too long ago.
var ErrBadSignature = errors.New("baton: bad webhook signature")

// VerifyWebhook checks a delivery's Baton-Signature header against its raw
// body: the HMAC must match, and its time must be within tolerance of now
// (a replayed old delivery is refused). For Go receivers; the README shows
// the same check in other languages.
func VerifyWebhook(secret, header string, body []byte, tolerance time.Duration) error {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("%w: header %q", ErrBadSignature, header)
	}
	if d := time.Since(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrBadSignature, d.Round(time.Second), tolerance)
	}
	want := webhookMAC(secret, ts, body)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return fmt.Errorf("%w: signature does not match", ErrBadSignature)
	}
	return nil
}
