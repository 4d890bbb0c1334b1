package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// limitsFile is LIMITS_FILE's form.
type limitsFile struct {
	Limits []fence.Limit `json:"limits"`
}

// readLimits reads and validates a limits file: every problem at once,
// each naming the entry; nothing is set unless all are valid.
func readLimits(path string) ([]fence.Limit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("LIMITS_FILE: %w", err)
	}
	var f limitsFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("LIMITS_FILE %s: %w", path, err)
	}
	var errs []error
	seen := map[string]int{}
	for i, l := range f.Limits {
		if j, dup := seen[l.Name]; dup {
			errs = append(errs, fmt.Errorf("limits[%d]: %q is limits[%d] again", i, l.Name, j))
		}
		seen[l.Name] = i
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("limits[%d]: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("LIMITS_FILE %s: %w", path, errors.Join(errs...))
	}
	return f.Limits, nil
}

// loadLimits sets the limits of LIMITS_FILE, if any.
func loadLimits(ctx context.Context, path string, cl *client.Client, log *slog.Logger) error {
	if path == "" {
		return nil
	}
	limits, err := readLimits(path)
	if err != nil {
		return err
	}
	for _, l := range limits {
		if err := cl.SetLimit(ctx, l); err != nil {
			return fmt.Errorf("LIMITS_FILE %s: %w", path, err)
		}
	}
	log.Info("limits_loaded", "file", path, "limits", len(limits))
	return nil
}
