package main

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner/kinds"
)

// JobsConfig is what the runner lets jobs do: who may submit a run may
// make the runner do all of it (docs/security.md).
type JobsConfig struct {
	// Kinds are the stock kinds this runner runs, comma-separated, of
	// exec, http, sleep and noop; leave exec out and no spec can make it
	// run a command. Default: exec,http,sleep,noop.
	Kinds string `env:"KINDS" envDefault:"exec,http,sleep,noop"`
	// EgressAllow lists what http nodes and webhooks may reach beyond the
	// public internet: CIDRs (10.0.0.0/8), addresses (127.0.0.1) and host
	// names (hooks.internal, *.svc.cluster.local), comma-separated.
	// Loopback, link-local (169.254.169.254), private, unique-local and
	// unspecified addresses are refused unless listed. Default: empty,
	// public addresses only (before this setting, every address).
	EgressAllow string `env:"EGRESS_ALLOW"`
	// ExecEnv names the runner's variables an exec command gets besides
	// PATH, HOME, LANG and TZ, comma-separated (NAME, or PREFIX_* for
	// every variable it starts). Default: empty; the runner's own settings
	// and secrets never reach a command (before this setting, commands got
	// the runner's whole environment).
	ExecEnv string `env:"EXEC_ENV"`
	// ExecEnvRefs names the runner's variables an exec node's env may read
	// with {"$env": "NAME"}, comma-separated (NAME or PREFIX_*). Default:
	// empty, no $env reads anything (before this setting, any variable).
	ExecEnvRefs string `env:"EXEC_ENV_REFS"`
	// ExecFileDirs are the absolute directories, comma-separated, under
	// which an exec node's env may read a regular file with {"$file":
	// "/path"} (at most 64 KiB, within 5s). Default: empty, no $file reads
	// anything (before this setting, any file the runner could read).
	ExecFileDirs string `env:"EXEC_FILE_DIRS"`
	// ExecStoreCommands are the exec commands (argv0, as specs write it,
	// comma-separated; * for every command) trusted with the runner's
	// Redis: they get BATON_REDIS_URL, BATON_PREFIX, BATON_NODE_KEY and
	// BATON_RUN_KEY, to keep fenced checkpoints (the LangGraph savers).
	// Such a command can change any run. Default: empty, none (before
	// this setting, every command).
	ExecStoreCommands string `env:"EXEC_STORE_COMMANDS"`
	// RedactEnv names the runner's variables whose values are secrets,
	// comma-separated: a value is shown as [redacted] in every result and
	// error of every node. API_TOKEN, WEBHOOK_SECRET, REDIS_PASSWORD and a
	// password in REDIS_URL always are, and so are the values an exec
	// node's $env and $file references read. Default: empty.
	RedactEnv string `env:"REDACT_ENV"`
}

// list splits a comma-separated setting.
func list(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// problems returns what is wrong with the settings, each naming its
// variable; skip names variables already reported.
func (j JobsConfig) problems(skip map[string]bool) []error {
	var errs []error
	if _, err := kinds.ParseKinds("KINDS", j.Kinds); err != nil && !skip["KINDS"] {
		errs = append(errs, err)
	}
	if _, err := egress.Parse("EGRESS_ALLOW", j.EgressAllow); err != nil && !skip["EGRESS_ALLOW"] {
		errs = append(errs, err)
	}
	for _, v := range []struct{ key, val string }{{"EXEC_ENV", j.ExecEnv}, {"EXEC_ENV_REFS", j.ExecEnvRefs}, {"REDACT_ENV", j.RedactEnv}} {
		for _, name := range list(v.val) {
			if strings.ContainsAny(name, "= \t\x00") || strings.Contains(strings.TrimSuffix(name, "*"), "*") {
				errs = append(errs, fmt.Errorf("%s %q: not a variable name (NAME, or PREFIX_* for a prefix)", v.key, name))
			}
		}
	}
	for _, d := range list(j.ExecFileDirs) {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("EXEC_FILE_DIRS %q: want an absolute directory", d))
		} else if filepath.Clean(d) == "/" {
			errs = append(errs, fmt.Errorf("EXEC_FILE_DIRS %q: the whole file system; name the directories of secrets", d))
		}
	}
	return errs
}

// stock is the stock kinds' options, and the names of those to register,
// from the settings (validated) and the runner's own: its Redis for
// trusted commands, and its secrets to redact.
func (c Config) stock(rconf redisconn.Config) (kinds.Stock, []string) {
	j := c.Jobs
	names, _ := kinds.ParseKinds("KINDS", j.Kinds)
	pol, _ := egress.Parse("EGRESS_ALLOW", j.EgressAllow)
	secrets := []string{c.APIToken, c.WebhookSecret, rconf.Password, rconf.SentinelPassword}
	if u, err := url.Parse(rconf.URL); err == nil && u.User != nil {
		p, _ := u.User.Password()
		secrets = append(secrets, p)
	}
	for _, name := range list(j.RedactEnv) {
		secrets = append(secrets, os.Getenv(name))
	}
	exec := kinds.ExecOptions{Prefix: c.Prefix, Env: list(j.ExecEnv), EnvRefs: list(j.ExecEnvRefs),
		FileDirs: list(j.ExecFileDirs), StoreCommands: list(j.ExecStoreCommands), Redact: kinds.NewRedactor(secrets...)}
	// Trusted commands get the store's URL; in cluster and sentinel modes
	// they get none (BATON_REDIS_URL unset) and must be configured
	// themselves.
	if rconf.Mode() == "url" {
		exec.RedisURL = cmp.Or(rconf.URL, redisconn.DefaultURL)
	}
	return kinds.Stock{Exec: exec, HTTP: kinds.HTTPOptions{Egress: pol}}, names
}
