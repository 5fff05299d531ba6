package scopes

import (
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
)

// The handshake with a held child: release, placed, report, record, go.
// Each step is one line on a pipe, and EOF at any point means the engine
// never runs. A scope launch sends the release as soon as the child is
// started and placed once the child is confirmed in the engine cgroup;
// a child already where it stays (a process group's, a probe's) gets
// both at once.

// handshake sends the release (argv, environment, confinement plan) and
// placed, and reads the held child's report: with a plan, the child has
// set up its confinement by then, and nothing has run yet.
func (h *heldChild) handshake(rel release, deadline time.Time) (confineReport, error) {
	if err := h.sendRelease(rel, deadline); err != nil {
		return confineReport{}, fmt.Errorf("release held child %d: %w", h.cmd.Process.Pid, err)
	}
	return h.placed(deadline)
}

// placed tells the held child it is placed and reads its report. A child
// whose set-up failed still reads placed first and then reports why; one
// that died before it read placed fails the write, and its report, if it
// wrote one, is the error.
func (h *heldChild) placed(deadline time.Time) (confineReport, error) {
	werr := h.sendPlaced()
	rep, err := h.awaitReport(deadline)
	if err == nil && werr != nil {
		err = fmt.Errorf("held child %d: tell it is placed: %w", h.cmd.Process.Pid, werr)
	}
	return rep, err
}

// confineScope ends the handshake of a scope launch whose release was
// sent. The evidence of a confined engine is read from the kernel (its
// namespaces as /proc/<pid>/ns shows them to this process) before the
// cohort is recorded and the engine runs; unconfined, the evidence is
// only why not.
func (h *heldChild) confineScope(confined bool, engineCg, why string, deadline time.Time) (proofs.Confinement, error) {
	pid := h.cmd.Process.Pid
	conf := proofs.Confinement{Reason: why}
	rep, err := h.placed(deadline)
	if err == nil && confined {
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
