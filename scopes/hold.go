package scopes

import (
	"context"

	"github.com/mosaic-agents/mosaic/proofs"
)

// holdUnit asks the user manager, on a goroutine, to keep the scope's unit
// loaded while this stop runs (userbus.Holder): the manager collects an
// inactive transient unit in the turn of its loop that ends it, before it
// reads the release's question, and the collection (the unit's files and
// cgroups, its log lines) was 0.5–0.8 ms of every stop's wait for the unit
// inactive (docs/benchmarks.md). It is taken as a phase starts and
// answered long before the anchor dies (the TERM phase's grace, the kill
// phase's question and reads; the first stop of a process also dials the
// bus). Nothing depends on it: without a user bus, or with its answer
// late, the release waits as it would have, and the manager drops the
// reference when this process's connection closes.
func (h *Handle) holdUnit() {
	if h.Cohort.Kind != proofs.KindScope || h.Cohort.Unit == "" {
		return
	}
	h.holdMu.Lock()
	defer h.holdMu.Unlock()
	if h.hold != nil {
		return // held for the stop in progress (its TERM phase took it)
	}
	held, unit := make(chan func(context.Context) error, 1), h.Cohort.Unit
	h.hold = held
	go func() {
		release, err := h.m.holder.Hold(context.Background(), unit)
		if err != nil {
			release = nil
		}
		held <- release
	}()
}

// letUnitGo drops the stop's reference (at the kill phase's end, or when
// the handle is abandoned or closed) on a goroutine, after the hold's own
// answer: the manager then collects the unit once it is inactive.
func (h *Handle) letUnitGo() {
	h.holdMu.Lock()
	held := h.hold
	h.hold = nil
	h.holdMu.Unlock()
	if held == nil {
		return
	}
	go func() {
		if release := <-held; release != nil {
			_ = release(context.Background())
		}
	}()
}
