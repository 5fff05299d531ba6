package scopes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// Term sends SIGTERM to every member through a pidfd (re-checking the
// engine's recorded start time) and waits up to grace for the cgroup's
// populated 0, watching cgroup.events with inotify. It never proves a stop.
func (h *Handle) Term(ctx context.Context, grace time.Duration) TermResult {
	if h.Cohort.Kind == proofs.KindProcessGroup {
		return h.termGroup(ctx, grace)
	}
	c := h.Cohort
	res := TermResult{Outcome: Stopping}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error()}
	}
	// Signal nothing at the path unless it is still our cgroup: after a
	// removal the unit name and the path can belong to someone else.
	if err := h.stillOurs(ctx, fs); err != nil {
		return TermResult{Outcome: Uncertain, Reason: "nothing signalled: " + err.Error()}
	}
	pids, err := fs.procs(c.Cgroup)
	if err != nil {
		if errors.Is(err, ErrCgroupAbsent) {
			return TermResult{Outcome: Uncertain, Reason: err.Error()}
		}
		res.Notes = append(res.Notes, "enumeration for SIGTERM incomplete: "+err.Error())
	}
	h.mu.Lock()
	targets := h.pinTerm(pids, &res)
	signalTerm(targets, &res)
	h.mu.Unlock()
	_, ok, err := fs.waitEvents(c.Cgroup, deadline(ctx, grace), func(e cgEvents) bool { return e.Populated == 0 })
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error(), Signalled: res.Signalled, Notes: res.Notes}
	}
	res.Emptied = ok
	h.mu.Lock()
	waitDeaths(h.term, time.Time{}) // record the deaths seen so far
	h.mu.Unlock()
	return res
}

// pinTerm pins every member before any is signalled: the held child
// forwards SIGTERM to the engine and, once the engine exits, the kernel
// kills the rest of its pid namespace, so a member signalled later in the
// loop could be gone before it was identified. The engine is pinned only
// with its recorded start time (a reused pid is never signalled); a member
// pinned by an earlier TERM phase keeps its first pidfd. Caller holds h.mu.
func (h *Handle) pinTerm(pids []int, res *TermResult) []*member {
	c := h.Cohort
	pinned := map[[2]uint64]*member{}
	for _, m := range h.term {
		pinned[identity(m)] = m
	}
	var targets []*member
	for _, pid := range pids {
		var want uint64
		if pid == c.PID {
			want = c.StartTime
		}
		m, err := openMember(pid, want, c.Cgroup)
		if err != nil {
			res.Notes = append(res.Notes, "not signalled: "+err.Error())
			continue
		}
		if old := pinned[identity(m)]; old != nil {
			m.close()
			m = old
		} else {
			h.term = append(h.term, m)
		}
		targets = append(targets, m)
	}
	return targets
}

// signalTerm sends SIGTERM through each target's pidfd, so it can reach
// only the pinned process.
func signalTerm(targets []*member, res *TermResult) {
	for _, m := range targets {
		if err := m.signal(unix.SIGTERM); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("SIGTERM pid %d: %v", m.PID, err))
		} else {
			res.Signalled = append(res.Signalled, m.Member)
		}
	}
}

// identity is a member's pid and start time: what names one process
// across pid reuse.
func identity(m *member) [2]uint64 { return [2]uint64{uint64(m.PID), m.StartTime} }
