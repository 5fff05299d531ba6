package controller

import (
	"encoding/hex"
	"fmt"
	"os"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/engine/claude"
)

// keptMarkRole is the store name's role of an execution's mark
// (keptName): kept beside the engine's descriptors, dropped with them.
const keptMarkRole = "mark"

// markWriter is an execution's mark (mark.go) and what wakes its writer.
type markWriter struct {
	f    *os.File
	wake chan struct{}
}

// poke wakes the writer without blocking: one wake covers every change
// since it last wrote.
func (m *markWriter) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// keepMark starts keeping x's mark in f, stored in the fd store (a new
// memfd when f is nil, a launch; a re-attach's is the one its
// predecessor kept, already there, written on from seq). Without a
// store, or a Claude engine, there is nothing to keep it for. A mark that
// cannot be made or stored is journaled: a crash then hands over nothing,
// and the next controller says so. It reports whether it stored a new
// mark.
func (c *Controller) keepMark(x *execution, f *os.File, seq uint64) bool {
	if c.cfg.FDStore == nil || !c.cfg.Conversation.IsClaude() || x.conn == nil {
		if f != nil {
			f.Close()
		}
		return false
	}
	made := f == nil
	a, err := driverAs[announcer](x.conn, "keep the mark")
	if err == nil && f == nil {
		if f, err = newMark(); err == nil {
			// Written before it is stored: a crash right after the store
			// finds what the launch vouched for, not an empty mark.
			if seq, err = writeMark(f, 0, c.markNow(x)); err == nil {
				err = c.cfg.FDStore.Store(keptName(x.id, keptMarkRole), f)
			}
			if err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		if !made && f != nil {
			f.Close() // the predecessor's
		}
		c.dropKept(x.id, keptMarkRole)
		c.audit(audit.Transition, nil, fmt.Sprintf("execution %s keeps no mark in the fd store (%v): a controller that crashes hands over nothing of its transcript", x.id, err),
			map[string]string{"EXECUTION": x.id})
		return false
	}
	m := &markWriter{f: f, wake: make(chan struct{}, 1)}
	x.mark.Store(m)
	m.poke() // a predecessor's mark says what this controller holds at once
	go c.writeMarks(x, m, a, seq)
	return made
}

// markNow is what x's mark says now: the bytes its watch vouched for
// and its engine's latest announcements.
func (c *Controller) markNow(x *execution) markState {
	return markState{Execution: x.id, Vouched: x.vouched.Load(), Announced: handOver(x.conn), Notified: noticesOf(x.conn)}
}

// noticesOf is what conn counted of the latest task notifications, as a
// mark holds it.
func noticesOf(conn engineConn) []markNotice {
	a, err := driverAs[announcer](conn, "hand over")
	if err != nil {
		return nil
	}
	var out []markNotice
	for _, n := range a.LatestNotified(claims.MaxAnnouncements) {
		out = append(out, markNotice{Said: hex.EncodeToString(n.Said[:]), N: n.N})
	}
	return out
}

// takeNotices seeds conn with the counts a mark holds; an entry that does
// not decode is left out (its line then waits for a frame, fail closed).
func takeNotices(conn engineConn, ns []markNotice) int {
	a, err := driverAs[announcer](conn, "take over")
	if err != nil {
		return 0
	}
	var out []claude.Notice
	for _, n := range ns {
		if d, ok := parseSaid(n.Said); ok && n.N > 0 {
			out = append(out, claude.Notice{Said: d, N: n.N})
		}
	}
	a.SeedNotified(out)
	return len(out)
}

// writeMarks writes x's mark each time its watch vouches for more or its
// engine announces a line, until the engine's output ends (nothing is
// left to re-attach to) or the controller closes.
func (c *Controller) writeMarks(x *execution, m *markWriter, a announcer, seq uint64) {
	defer m.f.Close()
	for {
		select {
		case <-a.Announcing():
		case <-m.wake:
		case <-x.conn.Done():
			return
		case <-c.closing:
			return
		}
		var err error
		if seq, err = writeMark(m.f, seq, c.markNow(x)); err != nil {
			c.audit(audit.Transition, nil, fmt.Sprintf("execution %s's mark is no longer written (%v): a controller that crashes now hands over what it last held", x.id, err),
				map[string]string{"EXECUTION": x.id})
			return
		}
	}
}

// crashMark is what a previous controller of the claim's execution kept
// in its mark (resume): read when the claim holds no handover (it
// crashed). err says the mark was kept but no slot of it checks.
type crashMark struct {
	exec string
	f    *os.File
	seq  uint64
	st   markState
	err  error
}

// takeMark reads the mark a previous controller kept for exec, if any.
// A mark of another execution, or one that does not check, names no
// bytes: err says why.
func takeMark(exec string, f *os.File) *crashMark {
	if f == nil {
		return nil
	}
	st, seq, err := readMark(f)
	switch {
	case err != nil:
	case st.Execution != exec:
		err = fmt.Errorf("the mark names execution %q", st.Execution)
	case st.Vouched == nil:
		err = fmt.Errorf("the mark names no bytes")
	case len(st.Announced) > claims.MaxAnnouncements || len(st.Notified) > claims.MaxAnnouncements:
		err = fmt.Errorf("the mark holds %d announcements and %d notification counts, over %d", len(st.Announced), len(st.Notified), claims.MaxAnnouncements)
	}
	return &crashMark{exec: exec, f: f, seq: seq, st: st, err: err}
}

// notices is what the mark hands over of the task notifications
// counted, none when it does not read.
func (m *crashMark) notices() []markNotice {
	if m == nil || m.err != nil {
		return nil
	}
	return m.st.Notified
}

// handed is what the mark hands over: its bytes and announcements, or,
// when it does not check, bytes no transcript begins with but an empty
// one (fail closed: every line is checked, none can be proven, and the
// binding ends uncertain).
func (m *crashMark) handed() (*claims.FileState, []claims.Announcement) {
	if m.err != nil {
		return fileState(nil), nil
	}
	v := *m.st.Vouched
	return &v, m.st.Announced
}

// take hands the mark's descriptor to the re-attached execution's writer
// (keepMark), nil if there is none.
func (m *crashMark) take() (*os.File, uint64) {
	if m == nil || m.f == nil {
		return nil, 0
	}
	f := m.f
	m.f = nil
	return f, m.seq
}

// close closes the mark's descriptor unless an execution took it.
func (m *crashMark) close() {
	if f, _ := m.take(); f != nil {
		f.Close()
	}
}

// markFor is the crash mark of exec, if resume read one.
func (c *Controller) markFor(exec string) *crashMark {
	if c.crashed == nil || c.crashed.exec != exec {
		return nil
	}
	return c.crashed
}
