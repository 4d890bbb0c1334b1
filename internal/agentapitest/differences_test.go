package agentapitest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// A known difference between baton and LangGraph's reference server, as the
// official clients see it. Each is copied, with its reason, to
// docs/agent-server.md's "Differences" section (TestDifferencesAreDocumented).
type knownDifference struct {
	// Path matches the difference's path (step, then the JSON path).
	Path *regexp.Regexp
	// Graphs is "js" or "python" when only that project shows it, else "".
	Graphs string
	// Reason says why, in the docs' words.
	Reason string
}

// differences is the one list of what the test accepts.
var differences = []knownDifference{
	{Path: regexp.MustCompile(`^cron\b`),
		Reason: "Crons: the reference server answers every cron route with an error (its crons are not implemented); baton schedules them."},
}

func known(d difference, graphs string) *knownDifference {
	for i := range differences {
		k := &differences[i]
		if (k.Graphs == "" || k.Graphs == graphs) && k.Path.MatchString(d.path) {
			return k
		}
	}
	return nil
}

// Every known difference is in docs/agent-server.md, with its reason.
func TestDifferencesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/agent-server.md")
	if err != nil {
		t.Fatalf("docs/agent-server.md: %v", err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	for _, k := range differences {
		if !strings.Contains(doc, strings.Join(strings.Fields(k.Reason), " ")) {
			t.Errorf("docs/agent-server.md's differences do not say: %q", k.Reason)
		}
	}
}
