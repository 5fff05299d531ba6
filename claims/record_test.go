package claims

import (
	"context"
	"sync"
	"testing"
)

// TestRecordReadDuringTransition: a controller reads its claim's record
// (status, admission, a test's check) while a transition it started in the
// background writes the store; under -race a bare read of the handle's
// revision is reported.
func TestRecordReadDuringTransition(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	c := claimIn(t, s, testKeys(), Active)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.MarkUncertain(ctx, "lost the engine"); err != nil {
			t.Error(err)
		}
	}()
	for range 100 {
		if st := c.Record().State; st != Active && st != Uncertain {
			t.Fatalf("record read during a transition has state %s", st)
		}
	}
	wg.Wait()
	if st := c.Record().State; st != Uncertain {
		t.Fatalf("after the transition the record says %s, want %s", st, Uncertain)
	}
}
