package client

import "testing"

// TestRecordOf: the fast path reads the leading "record" only when it is
// a plain string; anything else is decoded, with the same answer.
func TestRecordOf(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{`{"record":"event","seq":1}`, "event", true},
		{`{"seq":1,"record":"event"}`, "event", true},
		{`{"record":"ev\"x","seq":1}`, `ev"x`, true},
		{`{"record":"ev\u0065nt"}`, "event", true},
		{`{"record":""}`, "", false},
		{`{"record":1}`, "", false},
		{`{"seq":1}`, "", false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, ok := recordOf([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("recordOf(%s) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}
