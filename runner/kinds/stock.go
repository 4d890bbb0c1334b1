package kinds

import "github.com/batonrun/baton/runner"

// Registrar is where kinds are registered; *runner.Worker is one. It is an
// interface so this package depends only on runner's public types and a
// program can register the stock kinds on anything that routes by name.
type Registrar interface {
	Register(kind string, k runner.Kind)
}

// RegisterStock registers exec, http, sleep and noop with their defaults,
// under the names run specs use ("exec", "http", "sleep", "noop"). A program
// that needs other options registers its own instances after this call.
func RegisterStock(r Registrar) { RegisterStockWith(r, ExecOptions{}) }

// RegisterStockWith is RegisterStock with the exec kind's options, e.g. the
// store's Redis URL and prefix its commands get (ExecOptions.RedisURL).
func RegisterStockWith(r Registrar, exec ExecOptions) {
	r.Register("exec", Exec(exec))
	r.Register("http", HTTP(nil))
	r.Register("sleep", Sleep())
	r.Register("noop", Noop())
}
