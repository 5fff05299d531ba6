package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// failOpenWhile makes the controller's open of an engine's pipes fail
// while armed is set, once per arming.
func failOpenWhile(armed *atomic.Bool) func(*Controller) {
	return func(c *Controller) {
		c.test.openFault = func() error {
			if armed.Swap(false) {
				return errors.New("test: the driver refused the engine's pipes")
			}
			return nil
		}
	}
}

// TestEngineUnopenedIsStoppable: the launch released the engine, and its
// pipes then could not be wrapped in the engine's driver (here the open
// is made to fail), at the first start and at a relaunch. The engine may
// run and this controller cannot talk to it: the execution is recorded
// with its scope, the binding is uncertain naming a force stop, and a
// confirmed force stop kills the cohort and ends stopped on a cohort
// proof; recover then launches again. On a build that recorded no
// execution the force stop was refused no-engine, naming a restart of the
// controller, while the engine ran on.
func TestEngineUnopenedIsStoppable(t *testing.T) {
	var armed atomic.Bool
	armed.Store(true)
	r := newRigAt(t, sandboxDir(t), plainScript, nil, failOpenWhile(&armed))
	r.waitBinding("uncertain")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.recoveryControl(ctl)
	stopUnopened(t, r, ctl, gen)

	armed.Store(true)
	rcf := ctl.confirm("recover", gen)
	el := ctl.must(map[string]any{"type": "recover", "request": "rv1", "generation": gen, "confirmation": rcf}, "eligibility")
	lr := ctl.must(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, "receipt")
	if lr["state"] != protocol.ReceiptUncertain || lr["execution"] == "" {
		t.Fatalf("launch whose engine was released but not opened: %v; want uncertain, naming its execution", lr)
	}
	gen = lr["generation"].(float64)
	stopUnopened(t, r, ctl, gen)
	wayBack(t, r, ctl, gen)
}

// stopUnopened checks that r's binding is uncertain over a released
// engine it could not open, that a prompt is refused fenced and recover
// both naming a force stop as the way out, and that a confirmed force
// stop ends stopped on a cohort proof.
func stopUnopened(t *testing.T, r *rig, ctl *peer, gen float64) {
	t.Helper()
	r.ctrl.mu.Lock()
	rec := r.ctrl.st.claim.Record()
	x := r.ctrl.st.exec
	r.ctrl.mu.Unlock()
	if x == nil || x.handle == nil || x.conn != nil {
		t.Fatalf("execution %+v: want the released engine's, with its scope handle and no connection", x)
	}
	if rec.Engine == nil || rec.State == claims.Stopped {
		t.Fatalf("claim %s engine %+v: the engine was released, so its incarnation must be recorded and only a stop may end it", rec.State, rec.Engine)
	}
	// Fenced, not no-engine ("nothing to act on"): the engine may run.
	pr := ctl.refused(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "execution": rec.Execution, "text": "hi"}, protocol.CodeFenced)
	if msg := fmt.Sprint(pr["message"]); !strings.Contains(msg, "may still run") || !strings.Contains(msg, "force stop") {
		t.Fatalf("a prompt to the engine not opened was refused %q; want it to say the engine may run and name the force stop", msg)
	}
	rcf := ctl.confirm("recover", gen)
	rf := ctl.refused(map[string]any{"type": "recover", "request": newID("rv-"), "generation": gen, "confirmation": rcf}, protocol.CodeStopProof)
	if msg := fmt.Sprint(rf["message"]); !strings.Contains(msg, "mosaicctl stop --take --yes") || strings.Contains(msg, "restart") {
		t.Fatalf("recover before the stop says %q; want the force stop as the way out", msg)
	}
	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": newID("f-"), "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != protocol.ReceiptStopped || rc["execution"] != rec.Execution {
		t.Fatalf("force stop of a released engine that was never opened: %v; want stopped, execution %s", rc, rec.Execution)
	}
	r.ctrl.mu.Lock()
	rec = r.ctrl.st.claim.Record()
	r.ctrl.mu.Unlock()
	if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Type != proofs.TypeCohort {
		t.Fatalf("claim after the force stop: %s, proof %+v; want stopped on a cohort proof", rec.State, rec.Proof)
	}
	if err := claims.Proven(&rec); err != nil {
		t.Fatalf("the stopped revision does not verify: %v", err)
	}
	// No connection owned the engine's pipes: the stop closed them.
	for _, f := range []*os.File{x.handle.Stdin, x.handle.Stdout} {
		if _, err := f.Write(nil); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("the stopped engine's %s is still open (%v)", f.Name(), err)
		}
	}
}

// TestReattachUnopenedIsStoppable: as TestEngineUnopenedIsStoppable, at a
// controller restart that re-attaches to the running engine through the
// descriptors its predecessor kept in the fd store: the restarted
// controller cannot open the engine's pipes. It records the execution
// with the resumed scope handle, uncertain, and a confirmed force stop
// proves the cohort ended. On a build that returned the error the
// restarted controller held neither claim nor execution: its binding said
// idle while the engine ran, and the force stop refused no-engine.
func TestReattachUnopenedIsStoppable(t *testing.T) {
	fds := &memFDStore{}
	r := newRigAt(t, sandboxDir(t), plainScript, func(cfg *Config) { cfg.FDStore = fds }, nil)
	r.waitBinding("active")
	exec := r.execution()
	var armed atomic.Bool
	armed.Store(true)
	r.restartServed(func(cfg *Config) { cfg.Kept = fds.kept(t) }, failOpenWhile(&armed))
	b := r.waitBinding("uncertain")
	if got := r.execution(); got != exec || !strings.Contains(fmt.Sprint(b["admissionReason"]), "driver refused") {
		t.Fatalf("the restarted controller's execution is %q (%v); want the re-attached %s, its open refused", got, b["admissionReason"], exec)
	}
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.recoveryControl(ctl)
	stopUnopened(t, r, ctl, gen)
	wayBack(t, r, ctl, gen)
}

// TestReattachUnnumberedIsStoppable: as TestReattachUnopenedIsStoppable,
// when the restarted controller cannot number its re-attachment (the
// executions directory refuses the resume-<n> file: EACCES here, ENOSPC
// on a full disk). It records the execution with the resumed handle,
// uncertain, keeps the engine's descriptors in the fd store, and a
// confirmed force stop proves the cohort ended. On a build that marked
// the claim uncertain without an execution, the force stop was refused
// no-engine, naming a restart, while the engine ran on.
func TestReattachUnnumberedIsStoppable(t *testing.T) {
	fds := &memFDStore{}
	r := newRigAt(t, sandboxDir(t), plainScript, func(cfg *Config) { cfg.FDStore = fds }, nil)
	r.waitBinding("active")
	exec := r.execution()
	dir := filepath.Dir(r.ctrl.cohortPath(exec))
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	r.restartServed(func(cfg *Config) { cfg.Kept = fds.kept(t) }, nil)
	b := r.waitBinding("uncertain")
	if got := r.execution(); got != exec || !strings.Contains(fmt.Sprint(b["admissionReason"]), "number the re-attachment") {
		t.Fatalf("the restarted controller's execution is %q (%v); want the re-attached %s, its numbering refused", got, b["admissionReason"], exec)
	}
	fds.mu.Lock()
	_, kept := fds.files[keptName(exec, keptPidFD)]
	fds.mu.Unlock()
	if !kept {
		t.Fatal("the engine's descriptors were dropped from the fd store: a later restart could no longer re-attach")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.recoveryControl(ctl)
	stopUnopened(t, r, ctl, gen)
	wayBack(t, r, ctl, gen)
}

// restartServed shuts r's controller down as SIGTERM does (Serve's
// context cancelled, then Close), starts a second one as restartWith
// does, and serves it on r's socket: r then names the second controller.
func (r *rig) restartServed(mutate func(*Config), hook func(*Controller)) {
	r.t.Helper()
	r.cancel()
	<-r.served
	r.ctrl.Close()
	b, buf := r.restartWith(mutate, hook)
	l, err := activation.Listen(r.sock)
	if err != nil {
		r.t.Fatal(err)
	}
	srv := &Server{Conversation: r.cfg.Conversation.ID, Version: "mosaic/test", UID: os.Getuid(), Audit: b.log, Controller: b}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.serveErr = srv.Serve(ctx, l); close(done) }()
	r.ctrl, r.audit, r.ctx, r.cancel, r.served = b, buf, ctx, cancel, done
	r.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// memFDStore is the service manager's fd store in memory: its own copy of
// each descriptor stored, by name.
type memFDStore struct {
	mu    sync.Mutex
	files map[string]*os.File
}

// dupRaw returns a second descriptor of f, named name, through the raw
// descriptor, as activation.FDStore takes it and the manager hands it
// back: f.Fd() would make the descriptions the controller shares (the
// engine's stdin, the stop pipe) blocking for good.
func dupRaw(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if cerr := rc.Control(func(raw uintptr) { fd, err = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (s *memFDStore) Store(name string, f *os.File) error {
	d, err := dupRaw(f, name)
	if err != nil {
		return fmt.Errorf("store %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]*os.File{}
	}
	if old := s.files[name]; old != nil {
		old.Close()
	}
	s.files[name] = d
	return nil
}

func (s *memFDStore) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[name]; f != nil {
		f.Close()
		delete(s.files, name)
	}
	return nil
}

// kept hands a copy of every stored descriptor to a restarted controller
// (Config.Kept), as the manager passes them with LISTEN_FDNAMES.
func (s *memFDStore) kept(t *testing.T) map[string]*os.File {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*os.File{}
	for name, f := range s.files {
		d, err := dupRaw(f, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = d
	}
	if len(out) == 0 {
		t.Fatal("the fd store holds nothing to re-attach")
	}
	return out
}
