package fence

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Lease is what a claim hands the worker: the right to run one attempt of a
// node until the lease runs out on Redis time. Every write the worker makes
// afterwards carries Epoch and ClaimID, and the scripts compare them with the
// node's stored ones in the same atomic step.
type Lease struct {
	Thread string
	Run    string
	// Incarnation names the run's submission. A run id can be used again
	// once retention freed it; the new run's epochs start at 1 again, and
	// the incarnation keeps its tokens from being compared with the old
	// run's. Empty for runs stored before incarnations existed.
	Incarnation string
	Node        string
	Attempt     int64
	// Epoch is the fencing token: incremented by every claim of the node.
	Epoch int64
	// ClaimID is unique per claim. It keeps fencing safe when a failover
	// loses a claim and the same epoch is issued twice.
	ClaimID string
	Owner   string
	// Until is the lease deadline on Redis's clock, as of the claim or the
	// last renewal.
	Until time.Time
	// Limits are the node's limit keys and costs ("openai=1,tenant:acme=1"),
	// whose slots the claim holds and the scripts that end it free; ""
	// without limits.
	Limits string
}

// Token is the lease's fencing token, for side effects outside Redis.
func (l Lease) Token() Token {
	return Token{Run: l.Run, Incarnation: l.Incarnation, Node: l.Node, Epoch: l.Epoch, ClaimID: l.ClaimID}
}

// Ref names the node in the global indexes.
func (l Lease) Ref() string { return Ref(l.Thread, l.Run, l.Node) }

func (l Lease) String() string {
	return fmt.Sprintf("%s/%s@%d", l.Run, l.Node, l.Epoch)
}

// Token identifies one claim of one node for a downstream service:
// "run~incarnation/node@epoch/claim". A service that has seen epoch E for
// resource run~incarnation/node rejects any token with an epoch below E (see
// Guard). The incarnation keeps two runs that used the same run id apart:
// their epochs are two sequences, never one.
type Token struct {
	Run         string
	Incarnation string // empty: "run/node@epoch/claim", as before incarnations
	Node        string
	Epoch       int64
	ClaimID     string
}

// Resource is what the token fences: one node of one incarnation of a run,
// "run~incarnation/node".
func (t Token) Resource() string {
	if t.Incarnation == "" {
		return t.Run + "/" + t.Node
	}
	return t.Run + "~" + t.Incarnation + "/" + t.Node
}

func (t Token) String() string {
	return t.Resource() + "@" + strconv.FormatInt(t.Epoch, 10) + "/" + t.ClaimID
}

// ParseToken parses the form String produces.
func ParseToken(s string) (Token, error) {
	res, rest, ok := strings.Cut(s, "@")
	if !ok {
		return Token{}, fmt.Errorf("fence: token %q: missing @epoch", s)
	}
	run, node, ok := strings.Cut(res, "/")
	if !ok {
		return Token{}, fmt.Errorf("fence: token %q: resource is not run~incarnation/node", s)
	}
	run, inc, hasInc := strings.Cut(run, "~")
	if hasInc {
		if err := ValidateID("token incarnation", inc); err != nil {
			return Token{}, err
		}
	}
	ep, claim, ok := strings.Cut(rest, "/")
	if !ok || claim == "" {
		return Token{}, fmt.Errorf("fence: token %q: missing /claim", s)
	}
	epoch, err := strconv.ParseInt(ep, 10, 64)
	if err != nil || epoch < 1 {
		return Token{}, fmt.Errorf("fence: token %q: epoch %q is not a positive integer", s, ep)
	}
	if err := ValidateID("token run", run); err != nil {
		return Token{}, err
	}
	if err := ValidateID("token node", node); err != nil {
		return Token{}, err
	}
	if err := ValidateID("token claim id", claim); err != nil {
		return Token{}, err
	}
	return Token{Run: run, Incarnation: inc, Node: node, Epoch: epoch, ClaimID: claim}, nil
}
