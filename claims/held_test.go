package claims

import (
	"context"
	"testing"
)

// TestHeldSeats: a conversation's claim holds its seat from the launch
// until a proven stop, under any state in between; another
// conversation's claims are not its own.
func TestHeldSeats(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	held := func(conversation string) int {
		t.Helper()
		recs, err := s.HeldSeats(ctx, conversation)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := held("conv-1"); n != 0 {
		t.Fatalf("an empty store: %d held seats", n)
	}
	c, err := s.Acquire(ctx, testRequest(testKeys()))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		held int
	}{
		{"reserved", func() error { return nil }, 1},
		{"active", func() error { return c.Activate(ctx, testEngine()) }, 1},
		{"stopping", func() error { return c.BeginStop(ctx, "force stop") }, 1},
		{"stopped with a proof", func() error { return c.Stop(ctx, cohortProof(t, c.Record())) }, 0},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if n := held("conv-1"); n != st.held {
			t.Fatalf("%s: %d held seats, want %d", st.name, n, st.held)
		}
		if n := held("conv-2"); n != 0 {
			t.Fatalf("%s: another conversation holds %d seats", st.name, n)
		}
	}
}
