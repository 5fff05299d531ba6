package scopes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// Term sends SIGTERM to every member through a pidfd (re-checking the
// engine's recorded start time) and waits up to grace for the cgroup's
// populated 0, watching cgroup.events with inotify. It never proves a stop.
func (h *Handle) Term(ctx context.Context, grace time.Duration) TermResult {
	if h.Cohort.Kind == proofs.KindProcessGroup {
		defer h.letKeptGo()
		return h.termGroup(ctx, grace)
	}
	h.holdUnit() // until the kill phase's end
	c := h.Cohort
	res := TermResult{Outcome: Stopping}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error()}
	}
	// Signal nothing at the path unless it is still our cgroup: after a
	// removal the unit name and the path can belong to someone else. The
	// manager is asked while the members are pinned (pinning identifies,
	// it signals nothing), and the cgroup's id is checked after the
	// enumeration read it, so the pids come from the cgroup found ours.
	ours := make(chan error, 1)
	go func() { ours <- h.unitOurs(ctx) }()
	pids, perr := fs.procs(c.Cgroup)
	var pinned []pinResult
	if perr == nil {
		pinned = pinAll(pids, &c)
	}
	err = <-ours
	if err == nil {
		err = h.cgroupOurs(fs)
	}
	if err != nil {
		closePinned(pinned)
		return TermResult{Outcome: Uncertain, Reason: "nothing signalled: " + err.Error()}
	}
	if perr != nil {
		if errors.Is(perr, ErrCgroupAbsent) {
			return TermResult{Outcome: Uncertain, Reason: perr.Error()}
		}
		res.Notes = append(res.Notes, "enumeration for SIGTERM incomplete: "+perr.Error())
	}
	graceEnd := deadline(ctx, grace)
	h.noticeStop(graceEnd)
	h.mu.Lock()
	targets := h.pinTerm(pinned, &res)
	signalTerm(targets, &res)
	h.mu.Unlock()
	h.letKeptGo()
	_, ok, err := fs.waitEvents(c.Cgroup, graceEnd, func(e cgEvents) bool { return e.Populated == 0 })
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error(), Signalled: res.Signalled, Notes: res.Notes}
	}
	res.Emptied = ok
	return res
}

// pinResult is one pid of the enumeration, pinned or not.
type pinResult struct {
	m   *member
	err error
}

// pinWorkers pin a large cohort in parallel: each pin is a pidfd and two
// /proc reads, and the system calls of one member need nothing of
// another's.
const pinWorkers = 4

// pinAll pins every pid of the enumeration before any is signalled: the
// held child forwards SIGTERM to the engine and, once the engine exits,
// the kernel kills the rest of its pid namespace, so a member signalled
// before the loop reached another could be gone before it was identified.
// The engine is pinned only with its recorded start time (a reused pid is
// never signalled). Results keep the enumeration's order.
func pinAll(pids []int, c *Cohort) []pinResult {
	out := make([]pinResult, len(pids))
	pin := func(i int) {
		var want uint64
		if pids[i] == c.PID {
			want = c.StartTime
		}
		out[i].m, out[i].err = openMember(pids[i], want, c.engineCgroup())
	}
	inParallel(len(pids), pin)
	return out
}

// inParallel calls fn(i) for each i < n on pinWorkers goroutines (inline
// below 2*pinWorkers), each taking every pinWorkers-th index, and returns
// when all are done.
func inParallel(n int, fn func(i int)) {
	if n < 2*pinWorkers {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range pinWorkers {
		wg.Go(func() {
			for i := w; i < n; i += pinWorkers {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func closePinned(pinned []pinResult) {
	for _, p := range pinned {
		if p.m != nil {
			p.m.close()
		}
	}
}

// pinTerm takes the pinned members as the TERM targets: a member pinned by
// an earlier TERM phase keeps its first pidfd. Caller holds h.mu.
func (h *Handle) pinTerm(pinned []pinResult, res *TermResult) []*member {
	known := map[[2]uint64]*member{}
	for _, m := range h.term {
		known[identity(m)] = m
	}
	var targets []*member
	for _, p := range pinned {
		if p.err != nil {
			res.Notes = append(res.Notes, "not signalled: "+p.err.Error())
			continue
		}
		m := p.m
		if old := known[identity(m)]; old != nil {
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
