package scopes

import (
	"context"
	"fmt"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// PGroupReason is the text every process-group cohort carries.
const PGroupReason = "process-group fallback (no systemd user manager): a child that calls setsid leaves the group, " +
	"so membership can never be shown complete and a stop can end uncertain, never stopped"

// launchGroup is Launch without a user manager: the held child leads a
// process group of its own, pinned by a pidfd, and the engine runs
// unconfined (no cgroup to root a cgroup namespace at). Such a cohort's
// stops never reach stopped.
func (m *Manager) launchGroup(spec Spec, rel release, cause error) (h *Handle, err error) {
	pipes, err := newStdio(spec.Stderr)
	if err != nil {
		return nil, err
	}
	held, err := startHeld(spec.Dir, pipes.inR, pipes.outW, pipes.errW, false)
	if err != nil {
		pipes.closeAll()
		return nil, err
	}
	pipes.closeChild()
	var leader *member
	defer func() {
		if err == nil {
			return
		}
		if leader != nil {
			leader.close()
		}
		held.abort()
		pipes.closeAll()
	}()
	if err = awaitReady(held.ready, roleHeld, time.Now().Add(m.cfg.JobTimeout)); err != nil {
		return nil, fmt.Errorf("held child: %w", err)
	}
	// Our unreaped child: the pid cannot be reused before the pidfd pins it.
	if leader, err = openMember(held.cmd.Process.Pid, 0, cgroupRef{}); err != nil {
		return nil, fmt.Errorf("launch in process group: %w", err)
	}
	cohort, err := groupCohort(spec, leader, cause)
	if err == nil {
		_, err = held.handshake(rel, time.Now().Add(m.cfg.JobTimeout))
	}
	if err == nil {
		err = held.runEngine(cohort, spec.BeforeRelease)
	}
	if err != nil {
		return nil, fmt.Errorf("launch in process group: %w", err)
	}
	h = newHandle(m, pipes, held, cohort)
	h.leader = leader
	go h.reap()
	return h, nil
}

// groupCohort is the process-group cohort of a pinned leader: its pid is
// the pgid, and the reason says why no stop of it can be proven.
func groupCohort(spec Spec, leader *member, cause error) (Cohort, error) {
	boot, err := procfs.BootID()
	if err != nil {
		return Cohort{}, err
	}
	return Cohort{
		Kind:         proofs.KindProcessGroup,
		Reason:       PGroupReason + ": " + firstLine(cause.Error()),
		Conversation: spec.Conversation,
		Execution:    spec.Execution,
		BootID:       boot,
		PID:          leader.PID,
		StartTime:    leader.StartTime,
		Confinement:  proofs.Confinement{Reason: "process-group fallback: no cgroup to root a cgroup namespace at"},
	}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// pinLeader returns the fallback's engine pinned by a pidfd, opening it
// (with the recorded start time re-checked) if this handle has none yet.
// Caller holds h.mu.
func (h *Handle) pinLeader() (*member, error) {
	if h.leader != nil {
		return h.leader, nil
	}
	m, err := openMember(h.Cohort.PID, h.Cohort.StartTime, cgroupRef{})
	if err != nil {
		return nil, err
	}
	h.leader = m
	return m, nil
}

// signalGroup signals the fallback's process group, only while its leader
// is pinned: a pidfd holds the pid number, so the pgid cannot name another
// group. Caller holds h.mu.
func (h *Handle) signalGroup(sig unix.Signal) error {
	leader, err := h.pinLeader()
	if err != nil {
		return fmt.Errorf("process group %d not signalled: %w", h.Cohort.PID, err)
	}
	if err := unix.Kill(-leader.PID, sig); err != nil {
		return fmt.Errorf("signal %v to process group %d: %w", sig, leader.PID, err)
	}
	return nil
}

// termGroup sends SIGTERM to the fallback's process group. Only the
// engine is identified; the rest of the group cannot be enumerated.
func (h *Handle) termGroup(ctx context.Context, grace time.Duration) TermResult {
	res := TermResult{Outcome: Stopping}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.signalGroup(unix.SIGTERM); err != nil {
		res.Notes = append(res.Notes, err.Error())
		return res
	}
	res.Signalled = append(res.Signalled, h.leader.Member)
	waitDeaths([]*member{h.leader}, deadline(ctx, grace))
	return res
}

func (h *Handle) killGroup(ctx context.Context, opts StopOptions) StopResult {
	res := StopResult{Observation: h.baseObservation(opts.Stop)}
	obs := &res.Observation
	h.mu.Lock()
	if err := h.signalGroup(unix.SIGKILL); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	var ms []*member
	if h.leader != nil {
		ms = append(ms, h.leader)
		waitDeaths(ms, deadline(ctx, opts.KillTimeout))
	}
	h.mu.Unlock()
	obs.ObservedAt, obs.ObservedWall = procfs.BoottimeNanos(), time.Now()
	for _, m := range ms {
		obs.Members = append(obs.Members, proofs.MemberObservation{
			PID: m.PID, StartTime: m.StartTime, Comm: m.Comm, Died: m.Died, DiedAt: m.DiedAt,
		})
	}
	// A process group never proves a stop (K2): a setsid child is not in it.
	res.Outcome, res.Reason = Uncertain, PGroupReason
	return res
}
