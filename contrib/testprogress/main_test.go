package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrinter: a passing test is one line; a failing test prints its
// output; a package that fails under running tests (its -timeout's panic)
// prints theirs, so the goroutine dump is not lost.
func TestPrinter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []event
		want   []string
		failed bool
	}{
		{name: "pass", events: []event{
			{Action: "output", Package: "p", Test: "TestA", Output: "log line\n"},
			{Action: "pass", Package: "p", Test: "TestA", Elapsed: 1},
			{Action: "pass", Package: "p", Elapsed: 2},
		}, want: []string{"    ok    TestA (1.0s)\n", "ok    p 2.0s\n"}},
		{name: "a failing test", events: []event{
			{Action: "output", Package: "p", Test: "TestA", Output: "why it failed\n"},
			{Action: "fail", Package: "p", Test: "TestA", Elapsed: 1},
			{Action: "fail", Package: "p", Elapsed: 2},
		}, want: []string{"--- FAIL  TestA (1.0s)\nwhy it failed\n", "FAIL  p 2.0s\n"}, failed: true},
		{name: "timed out under a running test", events: []event{
			{Action: "output", Package: "p", Test: "TestDone", Output: "fine\n"},
			{Action: "pass", Package: "p", Test: "TestDone", Elapsed: 1},
			{Action: "output", Package: "p", Test: "TestSlow/sub", Output: "panic: test timed out after 10m0s\n"},
			{Action: "output", Package: "p", Output: "FAIL\tp\t600s\n"},
			{Action: "fail", Package: "p", Elapsed: 600},
		}, want: []string{"--- UNFINISHED  TestSlow (running when the package failed)\npanic: test timed out after 10m0s\n", "FAIL  p 600.0s\n"}, failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &printer{out: &out, kept: map[string]*buffer{}}
			for _, e := range tc.events {
				p.event(e)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if p.failed != tc.failed {
				t.Errorf("failed %v, want %v", p.failed, tc.failed)
			}
		})
	}
}
