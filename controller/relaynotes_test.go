package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRelayNotes holds the auth relay's journaling to its bound: a tool
// that makes the relay fail every tick, in ways that change, gets at most
// one entry a minute, and a failure that stands is still said.
func TestRelayNotes(t *testing.T) {
	errA := errors.New("user auth.json: a link to the keys")
	errB := errors.New("user auth.json: not JSON")
	lockOwn := fmt.Errorf("lock auth.json (own): %w", errAuthLocked)
	lockUser := fmt.Errorf("lock auth.json (user): %w", errAuthLocked)
	// steady, alternate and seq give the relay's result at tick i (one
	// tick a second, as the relay polls).
	steady := func(err error) func(int) error { return func(int) error { return err } }
	alternate := func(a, b error) func(int) error {
		return func(i int) error {
			if i%2 == 0 {
				return a
			}
			return b
		}
	}
	for _, tc := range []struct {
		name   string
		ticks  int
		result func(i int) error
		want   []string // the entries, each by a part of its message, in order
	}{
		{"no failure", 600, steady(nil), nil},
		{"the same failure every tick for ten minutes", 600, steady(errA), []string{"failed: " + errA.Error()}},
		{"two failures flipped every tick", 185, alternate(errA, errB),
			[]string{errA.Error(), errB.Error(), errA.Error(), errB.Error()}},
		{"a failure flipped with success every tick", 185, alternate(errA, nil),
			[]string{errA.Error(), errA.Error(), errA.Error(), errA.Error()}},
		{"a new failure held back, then standing past the minute", 120, func(i int) error {
			if i == 0 {
				return errA
			}
			return errB
		}, []string{errA.Error(), errB.Error()}},
		{"a failure held back, then gone before the minute is over", 300, func(i int) error {
			switch {
			case i == 0:
				return errA
			case i < 30:
				return errB
			}
			return nil
		}, []string{errA.Error()}},
		{"Pi's lock held for a while", 59, steady(lockOwn), nil},
		{"a lock kept past a minute", 600, steady(lockOwn), []string{"waited over a minute for a lock"}},
		{"a lock kept past a minute whose name flips every tick", 185, alternate(lockOwn, lockUser),
			[]string{lockUser.Error(), lockOwn.Error(), lockUser.Error()}},
		{"a lock dropped every other tick never stands", 600, alternate(lockOwn, nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n relayNotes
			start := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
			var got []string
			for i := range tc.ticks {
				if msg := n.note(tc.result(i), start.Add(time.Duration(i)*time.Second)); msg != "" {
					got = append(got, fmt.Sprintf("%ds: %s", i, msg))
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d entries, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("entry %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
