package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// crashedHost is the machine as a restarted controller sees it: this
// process, which wrote the claim as the first controller, is gone.
type crashedHost struct{ claims.Host }

func (h crashedHost) Alive(p claims.Process) (bool, error) {
	if p.PID == os.Getpid() {
		return false, nil
	}
	return h.Host.Alive(p)
}

// restart starts a second controller over r's conversation as if the
// first had crashed: same claim root, cohort records and scopes.
func (r *rig) restart() (*Controller, *syncBuffer) {
	r.t.Helper()
	return r.restartWith(nil, nil)
}

// restartWith is restart with mutate applied to the second controller's
// Config and hook installing its test hooks before Start.
func (r *rig) restartWith(mutate func(*Config), hook func(*Controller)) (*Controller, *syncBuffer) {
	r.t.Helper()
	store, err := claims.Open(r.cfg.Claims.Root(), claims.WithHost(crashedHost{claims.LocalHost()}))
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := r.cfg
	cfg.Claims = store
	buf := &syncBuffer{}
	cfg.Audit = audit.NewWriter(cfg.Conversation.ID, buf)
	if mutate != nil {
		mutate(&cfg)
	}
	b := New(cfg)
	if hook != nil {
		hook(b)
	}
	if err := b.Start(context.Background()); err != nil {
		r.t.Fatalf("restart: %v", err)
	}
	return b, buf
}

// waitStop waits for c's current stop to reach a terminal state.
func waitStop(t *testing.T, c *Controller) protocol.Stop {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c.mu.Lock()
		s := c.st.stop
		var cp protocol.Stop
		if s != nil {
			cp = *s
		}
		c.mu.Unlock()
		if s != nil && terminal[cp.State] {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop ended within the bound (current %+v)", cp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// K10: the controller crashes during a confirmed force stop (the claim
// says stopping, a setsid tool child still runs in the scope). The next
// controller finds stopping, launches nothing, resumes that stop and
// reaches stopped only with a verifying cohort proof; the child is dead.
// A crash with no stop under way is not resumed: the restart leaves the
// engine's cohort alone, uncertain, for a person to force stop.
func TestRestartDuringForceStop(t *testing.T) {
	script := `{"turns":[{"text":["starting "],"tool":{"command":"setsid sleep 300 & echo $! > child.pid; echo started"}},{"endless":true,"chunkDelayMs":20}]}`
	for _, stopping := range []bool{true, false} {
		name := map[bool]string{true: "crash while stopping", false: "crash while active"}[stopping]
		t.Run(name, func(t *testing.T) {
			sandboxtest.Require(t)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			// The crashed controller's draft revisions fail to be written:
			// its queued item is a draft in its memory only, and queued on
			// disk, as after a crash part way through making drafts.
			var failDrafts atomic.Bool
			r := newRigAt(t, dir, script, nil, func(c *Controller) {
				c.test.queueFault = func(point, _ string) error {
					if failDrafts.Load() && point == "temp-created" {
						return errors.New("injected: the draft revision cannot be written")
					}
					return nil
				}
			})
			r.waitBinding("active")
			ctl := r.dial()
			ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
			gen := r.takeover(ctl)
			ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "run it"}, "receipt")
			ctl.await(func(m map[string]any) bool { return m["kind"] == "tool-end" })
			behind := ctl.queue(gen, "queued behind the turn")["item"].(string)
			failDrafts.Store(true)
			child := readPID(t, r)
			exec := r.execution()
			if stopping {
				crashed := make(chan struct{})
				r.ctrl.test.beforeKill = func() { close(crashed); select {} } // the controller never gets further
				cf := ctl.confirm("force-stop", gen)
				ctl.send(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf})
				<-crashed
				r.ctrl.Close() // its engine loses stdin, as it would at a crash
			}
			b, log := r.restart()
			if !stopping {
				b.mu.Lock()
				st, stop := b.st.binding, b.st.stop
				b.mu.Unlock()
				if st != protocol.BindingUncertain || stop != nil || !alive(child) {
					t.Fatalf("restart without a stop in progress: binding %s, stop %+v, child alive %v; want uncertain, no stop, child untouched",
						st, stop, alive(child))
				}
				return
			}
			s := waitStop(t, b)
			if s.State != "stopped" || s.Execution != exec {
				t.Fatalf("resumed stop %+v; want stopped, of execution %s", s, exec)
			}
			// The resumed force stop finishes the drafts: the item queued
			// on disk is a draft, listed in the stop, never left queued.
			b.mu.Lock()
			it := b.itemLocked(behind)
			b.mu.Unlock()
			if it == nil || it.State != protocol.ReceiptDraft || !contains(s.QueueDrafts, behind) {
				t.Fatalf("after the resumed force stop the queued item is %+v, stop drafts %v; want a draft, listed", it, s.QueueDrafts)
			}
			// The resumed stop never read the engine's stream: its effects
			// are unknown, never reconciled.
			if s.Effects == nil || s.Effects.Disposition != "uncertain" {
				t.Fatalf("resumed stop effects %+v; want uncertain (the stream was not observed)", s.Effects)
			}
			if _, rep, err := proofs.VerifyBytes(s.Proof); err != nil || !rep.OK() {
				t.Fatalf("the resumed stop's proof does not verify: %v %+v", err, rep)
			}
			b.mu.Lock()
			rec := b.st.claim.Record()
			b.mu.Unlock()
			if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest {
				t.Fatalf("claim after the resumed stop: %s, proof %+v", rec.State, rec.Proof)
			}
			if alive(child) {
				t.Fatalf("the setsid tool child %d survived the resumed stop", child)
			}
			for _, e := range log.entries(t) {
				if e["MOSAIC_EVENT"] == string(audit.Launch) {
					t.Fatalf("the restarted controller launched: %v", e)
				}
			}
			if es, _ := filepath.Glob(filepath.Join(filepath.Dir(r.cfg.Claims.Root()), "executions", "*.json")); len(es) != 1 {
				t.Fatalf("executions recorded: %v; want only the stopped one", es)
			}
		})
	}
}

// K10 with the fd store: a controller ends in a confirmed force stop
// before it signalled anything; its successor resumes the stop with the
// stop pipe it kept (a stopping claim's, resume), so the resumed TERM
// phase gives the tools their grace: a tool that takes 300 ms in its
// SIGTERM handler finishes it, and the stop ends stopped with a proof.
func TestResumedForceStopKeepsTheGrace(t *testing.T) {
	dir := sandboxDir(t)
	tool := `setsid sh -c 'trap "sleep 0.3; echo done > graced; exit 0" TERM; : > armed; while :; do sleep 0.05; done' >/dev/null 2>&1 & echo started`
	script, _ := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"text": []string{"starting "}, "tool": map[string]any{"command": tool}},
		map[string]any{"endless": true, "chunkDelayMs": 20},
	}})
	fds := &memFDStore{}
	r := newRigAt(t, dir, string(script), func(cfg *Config) { cfg.FDStore = fds; cfg.Grace = 3 * time.Second }, nil)
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "run it"}, "receipt")
	armed(t, filepath.Join(dir, "proj"))
	crashed := make(chan struct{})
	r.ctrl.test.beforeKill = func() { close(crashed); select {} } // the controller never gets further
	cf := ctl.confirm("force-stop", gen)
	ctl.send(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf})
	<-crashed
	r.ctrl.Close() // the fd store keeps the engine's stdin, as the manager's would
	b, _ := r.restartWith(func(cfg *Config) { cfg.Kept = fds.kept(t) }, nil)
	t.Cleanup(b.Close)
	if s := waitStop(t, b); s.State != "stopped" {
		t.Fatalf("resumed stop %+v; want stopped", s)
	}
	fds.mu.Lock()
	left := len(fds.files)
	fds.mu.Unlock()
	if left != 0 {
		t.Errorf("the fd store still holds %d descriptor(s) of the stopped engine", left)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "proj", "graced")); err != nil || strings.TrimSpace(string(got)) != "done" {
		t.Fatalf("the tool's SIGTERM handler did not finish (%q, %v): the resumed stop gave it no grace", got, err)
	}
}

// armed waits for the tool that set its SIGTERM trap to say so (the file
// armed in dir): a SIGTERM before it would kill the tool outright.
func armed(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "armed")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool never set its SIGTERM trap")
		}
	}
}
