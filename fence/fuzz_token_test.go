package fence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonrun/baton/fence"
)

// FuzzParseToken: whatever a request's fencing-token header holds, parsing
// never panics; a token that parses is made of valid ids only (so it can
// become a guard key), prints back to the same text, and parses to itself.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"deploy-42~a1b2c3d4e5f6/migrate@3/9f2c0d",
		"order-7/charge@1/c1",
		"r~i/n@9223372036854775807/c",
		"r/n@0/c", "r/n@-1/c", "r/n@1/", "r/n@1", "r@1/c", "/n@1/c", "r~/n@1/c",
		"r/n/x@1/c", "r{x}/n@1/c", "r/n@1/c/d", "r/n@01/c", "r/n@+1/c", "..~x/n@1/c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fence.ParseToken(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fence: token") && !errors.Is(err, fence.ErrInvalidID) {
				t.Fatalf("ParseToken(%q): error %q says neither where nor what", s, err)
			}
			return
		}
		for field, id := range map[string]string{"run": tok.Run, "node": tok.Node, "claim": tok.ClaimID} {
			if err := fence.ValidateID(field, id); err != nil {
				t.Fatalf("ParseToken(%q) accepted an invalid %s: %v", s, field, err)
			}
		}
		if tok.Incarnation != "" {
			if err := fence.ValidateID("incarnation", tok.Incarnation); err != nil {
				t.Fatalf("ParseToken(%q) accepted an invalid incarnation: %v", s, err)
			}
		}
		if tok.Epoch < 1 {
			t.Fatalf("ParseToken(%q) accepted epoch %d", s, tok.Epoch)
		}
		again, err := fence.ParseToken(tok.String())
		if err != nil || again != tok {
			t.Fatalf("ParseToken(%q) = %+v, which prints as %q and parses to %+v, %v", s, tok, tok.String(), again, err)
		}
	})
}
