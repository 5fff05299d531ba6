package proofs

import (
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/internal/shape"
)

// Check is one thing Verify looked at, with its outcome.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	err    error  // the sentinel a failure maps to
}

// Report is the outcome of verifying one proof: every check made, in order.
type Report struct {
	Type   string  `json:"type"`
	Digest string  `json:"digest"`
	Checks []Check `json:"checks"`
}

// OK reports whether every check passed. A report with no checks is not OK.
func (r Report) OK() bool {
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Err joins the failed checks into one error, nil if all passed.
func (r Report) Err() error {
	var errs []error
	for _, c := range r.Checks {
		if !c.OK {
			errs = append(errs, fmt.Errorf("%s: %s: %w", c.Name, c.Detail, c.err))
		}
	}
	if len(r.Checks) == 0 {
		errs = append(errs, fmt.Errorf("no checks: %w", ErrMalformed))
	}
	return errors.Join(errs...)
}

// checks accumulates Check values.
type checks []Check

func (cs *checks) add(name string, ok bool, sentinel error, format string, args ...any) {
	*cs = append(*cs, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...), err: sentinel})
}

// ValidBootID reports whether id has the form of
// /proc/sys/kernel/random/boot_id (a lowercase UUID, no newline).
func ValidBootID(id string) bool { return shape.UUID(id) }
