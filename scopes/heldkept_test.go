package scopes

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
)

// TestProcessGroupKillLetsTheKeptGo: the kept stop pipe a Reattach
// handle holds for a resumed stop (HoldKept) is let go by a process-group
// cohort's kill phase too, which returns before a scope's does: the
// controller never closes an adopted execution's handle, so it would stay
// open in it for good. (Found by review, helper 118.)
func TestProcessGroupKillLetsTheKeptGo(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	// A pid that names no process: signalGroup fails, as for an engine
	// already gone; the held stdio must be let go all the same.
	h := &Handle{Cohort: Cohort{Kind: proofs.KindProcessGroup, PID: 1 << 22, StartTime: 1}}
	h.HoldKept(Kept{Stop: inW})
	if h.StopPipe() == nil {
		t.Fatal("HoldKept refused a pipe's write end")
	}
	h.Kill(context.Background(), StopOptions{Stop: "s-test", KillTimeout: time.Second})
	done := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := inR.Read(b[:])
		done <- err
	}()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("read of the stop pipe: %v, want EOF", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the kept stop pipe of a process-group cohort is still held after its kill phase")
	}
}
