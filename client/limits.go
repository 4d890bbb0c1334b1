package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// checkLimits refuses a run naming a limit that is not set: each such
// name is a *spec.Error naming the node's field, and nothing is stored.
// A run that names no limit costs no round trip.
func (c *Client) checkLimits(ctx context.Context, compiled *spec.Compiled) error {
	var keys, fields []string
	for i, n := range compiled.Nodes {
		k, f := n.LimitKeys(i)
		keys, fields = append(keys, k...), append(fields, f...)
	}
	if len(keys) == 0 {
		return nil
	}
	missing, err := c.store.CheckDeclared(ctx, keys)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(missing))
	for _, i := range missing {
		errs = append(errs, &spec.Error{Field: fields[i], Msg: fmt.Sprintf(
			"no limit %q is set, and no prefix rule covers it (enqueue limit set %s --concurrency N, or a rule %s)",
			keys[i], keys[i], ruleFor(keys[i]))})
	}
	return errors.Join(errs...)
}

// ruleFor suggests a prefix rule covering key: "tenant:*" for
// "tenant:acme"; "NAME:*" when key has no colon.
func ruleFor(key string) string {
	if i := strings.LastIndexByte(key, ':'); i > 0 {
		return key[:i+1] + "*"
	}
	return "NAME:*"
}

// SetLimit sets a fleet-wide limit (fence.Limit); claims follow it from
// the next one on. An invalid limit wraps fence.ErrInvalidData and
// changes nothing.
func (c *Client) SetLimit(ctx context.Context, l fence.Limit) error { return c.store.SetLimit(ctx, l) }

// DeleteLimit removes a limit; it reports whether one was set.
func (c *Client) DeleteLimit(ctx context.Context, name string) (bool, error) {
	return c.store.DeleteLimit(ctx, name)
}

// Limits lists the limits set.
func (c *Client) Limits(ctx context.Context) ([]fence.Limit, error) { return c.store.Limits(ctx) }
