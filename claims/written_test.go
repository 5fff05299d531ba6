package claims

import (
	"context"
	"testing"
)

// TestWrittenSurvivesTheStop: the header id of a session file seen while
// a claim held it reaches the stopped revision under both keys, whether
// the launch found the file (Acquire) or the stop saw the engine write it
// (StopVouched, Hibernate); a stop that saw nothing keeps what was
// recorded, and a claim that never saw a file records none.
func TestWrittenSurvivesTheStop(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, atAcquire, atStop, want string
		hibernate                     bool
	}{
		{"never written", "", "", "", false},
		{"found at launch", "sess-a", "", "sess-a", false},
		{"written by the engine", "", "sess-b", "sess-b", false},
		{"written, then hibernated", "", "sess-c", "sess-c", true},
		{"found at launch, hibernated without a look", "sess-d", "", "sess-d", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), newHost(100))
			keys := testKeys()
			req := testRequest(keys)
			req.Written = tc.atAcquire
			c, err := s.Acquire(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range []func() error{
				func() error { return c.Activate(ctx, testEngine()) },
				func() error { return c.BeginStop(ctx, "force stop") },
				func() error {
					if tc.hibernate {
						return c.Hibernate(ctx, cohortProof(t, c.Record()), "", "leaf-1", tc.atStop, nil)
					}
					return c.StopVouched(ctx, cohortProof(t, c.Record()), tc.atStop, nil)
				},
			} {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			st := mustCurrent(t, s, keys)
			for _, rec := range []*Record{st.Seat, st.Session} {
				if rec.State != Stopped || rec.Written != tc.want {
					t.Fatalf("%s key: state %s, written %q, want stopped and %q", rec.KeyKind, rec.State, rec.Written, tc.want)
				}
				if err := Proven(rec); err != nil {
					t.Fatalf("%s key: %v", rec.KeyKind, err)
				}
			}
		})
	}
}
