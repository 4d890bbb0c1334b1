package kinds

import (
	"fmt"
	"slices"
	"strings"

	"github.com/batonrun/baton/runner"

	"github.com/batonrun/baton/jobpolicy"
)

// Registrar is where kinds are registered; *runner.Worker is one. It is an
// interface so this package depends only on runner's public types and a
// program can register the stock kinds on anything that routes by name.
type Registrar interface {
	Register(kind string, k runner.Kind)
}

// StockNames are the stock kinds' names, as run specs use them.
var StockNames = jobpolicy.StockKinds

// RegisterStock registers exec, http, sleep and noop with their defaults,
// under the names run specs use ("exec", "http", "sleep", "noop"). A program
// that needs other options registers its own instances after this call.
func RegisterStock(r Registrar) { RegisterStockWith(r, ExecOptions{}) }

// RegisterStockWith is RegisterStock with the exec kind's options, e.g. the
// store's Redis URL and prefix its commands get (ExecOptions.RedisURL).
func RegisterStockWith(r Registrar, exec ExecOptions) {
	RegisterStockOnly(r, Stock{Exec: exec}, nil)
}

// Stock is the options of every stock kind.
type Stock struct {
	Exec ExecOptions
	HTTP HTTPOptions
}

// RegisterStockOnly registers the stock kinds that names lists (nil: all
// of them) with opts, each wrapped in Redacting with opts.Exec.Redact. A
// runner that must not run commands leaves exec out (KINDS=http,sleep,noop).
func RegisterStockOnly(r Registrar, opts Stock, names []string) {
	if names == nil {
		names = StockNames
	}
	red := opts.Exec.Redact
	for _, name := range names {
		var k runner.Kind
		switch name {
		case "exec":
			k = Exec(opts.Exec) // redacts its own, with the attempt's references
		case "http":
			k = Redacting(HTTPWith(opts.HTTP), red)
		case "sleep":
			k = Redacting(Sleep(), red)
		case "noop":
			k = Redacting(Noop(), red)
		default:
			continue // ParseKinds refuses what is not stock
		}
		r.Register(name, k)
	}
}

// ParseKinds reads a list of stock kind names (KINDS=http,sleep,noop),
// refusing a name that is not one, naming setting.
func ParseKinds(setting, s string) ([]string, error) {
	var out, bad []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch {
		case !slices.Contains(StockNames, f):
			bad = append(bad, fmt.Sprintf("%q", f))
		case !slices.Contains(out, f):
			out = append(out, f)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: %s: not a stock kind; want some of %s", setting, strings.Join(bad, ", "), strings.Join(StockNames, ","))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty: want some of %s", setting, strings.Join(StockNames, ","))
	}
	return out, nil
}
