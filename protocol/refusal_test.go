package protocol

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// TestWrapSaysTheCauseOnce: Err never travels, so Wrap folds the cause
// into the message, and Error does not add it again; a refusal as the
// cause gives its message, not its code, and errors.Is/As still reach it.
func TestWrapSaysTheCauseOnce(t *testing.T) {
	inner := Refuse(CodeAlreadyActive, "seat key is held by claim c-1")
	tests := []struct {
		name      string
		err       error
		format    string
		args      []any
		message   string
		errorText string
	}{
		{"plain cause", fs.ErrNotExist, "read %s", []any{"/x"},
			"read /x: file does not exist", "configuration: read /x: file does not exist"},
		{"cause alone", fs.ErrNotExist, "", nil,
			"file does not exist", "configuration: file does not exist"},
		{"no cause", nil, "bad %s", []any{"key"},
			"bad key", "configuration: bad key"},
		{"refusal as cause", inner, "launch", nil,
			"launch: seat key is held by claim c-1", "configuration: launch: seat key is held by claim c-1"},
		{"wrapped refusal as cause", fmt.Errorf("acquire: %w", inner), "launch", nil,
			"launch: acquire: seat key is held by claim c-1", "configuration: launch: acquire: seat key is held by claim c-1"},
		{"refusal with its own cause", Wrap(CodeClaimStore, fs.ErrPermission, "read claim"), "", nil,
			"read claim: permission denied", "configuration: read claim: permission denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Wrap(CodeConfiguration, tc.err, tc.format, tc.args...)
			if r.Message != tc.message {
				t.Errorf("Message = %q, want %q", r.Message, tc.message)
			}
			if r.Error() != tc.errorText {
				t.Errorf("Error() = %q, want %q", r.Error(), tc.errorText)
			}
			if tc.err != nil && !errors.Is(r, tc.err) {
				t.Errorf("errors.Is(r, cause) = false")
			}
			if c := CodeOf(r); c != CodeConfiguration {
				t.Errorf("CodeOf = %q", c)
			}
			for _, code := range []string{CodeAlreadyActive, CodeClaimStore} {
				if strings.Contains(r.Message, code) {
					t.Errorf("message %q names the inner code %s", r.Message, code)
				}
			}
		})
	}
	var got *Refusal
	outer := Wrap(CodeLaunchFailed, fmt.Errorf("x: %w", inner), "")
	if !errors.As(outer.Err, &got) || got != inner {
		t.Fatalf("errors.As does not reach the inner refusal")
	}
}
