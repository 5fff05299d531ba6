package scopes

import (
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
)

// The handshake with a held child that sits in its cohort: release, report,
// record, go. Each step is one line on a pipe, and EOF at any point means
// the engine never runs.

// handshake sends the release (argv, environment, confinement plan) and
// reads the held child's report: with a plan, the child has set up its
// confinement by then, and nothing has run yet.
func (h *heldChild) handshake(rel release, deadline time.Time) (confineReport, error) {
	if err := h.sendRelease(rel); err != nil {
		return confineReport{}, fmt.Errorf("release held child %d: %w", h.cmd.Process.Pid, err)
	}
	return h.awaitReport(deadline)
}

// confineScope runs the handshake of a scope launch. The evidence of a
// confined engine is read from the kernel (its namespaces as /proc/<pid>/ns
// shows them to this process) before the cohort is recorded and the engine
// runs; unconfined, the evidence is only why not.
func (h *heldChild) confineScope(rel release, engineCg, why string, deadline time.Time) (proofs.Confinement, error) {
	pid := h.cmd.Process.Pid
	if err := h.sendRelease(rel); err != nil {
		return proofs.Confinement{}, fmt.Errorf("release held child %d: %w", pid, err)
	}
	conf := proofs.Confinement{Reason: why}
	rep, err := h.awaitReport(deadline)
	if err == nil && rel.Confine != nil {
		conf, err = evidence(pid, rep, engineCg)
	}
	if err != nil {
		return proofs.Confinement{}, fmt.Errorf("%w: %w", ErrConfinement, err)
	}
	return conf, nil
}

// runEngine records the cohort (before, the controller's BeforeRelease)
// and only then lets the held child run the engine: an engine whose cohort
// could not be recorded never runs.
func (h *heldChild) runEngine(c Cohort, before func(Cohort) error) error {
	if before != nil {
		if err := before(c); err != nil {
			return fmt.Errorf("before release: %w", err)
		}
	}
	if err := h.releaseEngine(); err != nil {
		return fmt.Errorf("release held child %d: %w", h.cmd.Process.Pid, err)
	}
	return nil
}
