package controller

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// toolChildScript runs a bash tool whose child calls setsid and outlives
// the tool call, then settles; a new execution plays it again.
const toolChildScript = `{"turns":[{"text":["starting "],"tool":{"command":"setsid sleep 300 & echo $! > child.pid; echo started"}},{"text":["done."]}]}`

// promptSettled sends a prompt under control and waits for its turn to
// settle.
func promptSettled(t *testing.T, ctl *peer, gen float64, text string) {
	t.Helper()
	rc := ctl.answered(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": text})
	if rc["state"] != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt receipt %v", rc)
	}
	ctl.settled()
}

// proofBasis decodes a stop's proof and returns its basis.
func proofBasis(t *testing.T, s protocol.Stop) proofs.Basis {
	t.Helper()
	p, rep, err := proofs.VerifyBytes(s.Proof)
	if err != nil || !rep.OK() {
		t.Fatalf("the proof of stop %s does not verify: %v %v", s.ID, err, rep.Err())
	}
	return p.(*proofs.CohortProof).Basis
}

// currentStop returns a copy of the controller's current stop.
func currentStop(r *rig) protocol.Stop {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	if r.ctrl.st.stop == nil {
		return protocol.Stop{}
	}
	return *r.ctrl.st.stop
}

// wayBack is the documented way back from a stop proven on the binding
// stopped: recover with a confirmation, launch, and a prompt answered by
// the new execution.
func wayBack(t *testing.T, r *rig, ctl *peer, gen float64) {
	t.Helper()
	rcf := ctl.confirm("recover", gen)
	el := ctl.must(map[string]any{"type": "recover", "request": newID("rv-"), "generation": gen, "confirmation": rcf}, "eligibility")
	lr := ctl.must(map[string]any{"type": "launch", "request": newID("l-"), "generation": gen, "eligibility": el["id"]}, "receipt")
	if lr["state"] != protocol.ReceiptLaunched {
		t.Fatalf("launch receipt %v", lr)
	}
	r.waitBinding("active")
	promptSettled(t, ctl, lr["generation"].(float64), "again")
}

// TestExternalScopeStopHasAWayBack: `systemctl --user stop` or `systemctl
// --user kill --signal=KILL` of the engine's scope leaves the binding
// uncertain (the engine exited without a stop). A confirmed force stop
// then ends stopped, on the basis cgroup-removed, the setsid tool child
// being dead with the scope; recover refuses before it, naming the way
// out, and works after it; a new execution answers. On a build without the
// basis the force stop ended uncertain "cgroup absent", every later one
// too, and recover refused stop-proof for good.
func TestExternalScopeStopHasAWayBack(t *testing.T) {
	for _, external := range [][]string{{"stop"}, {"kill", "--signal=KILL"}} {
		t.Run(strings.Join(external, " "), func(t *testing.T) {
			r := newRig(t, toolChildScript, nil)
			r.waitBinding("active")
			ctl := r.dial()
			ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
			gen := r.takeover(ctl)
			promptSettled(t, ctl, gen, "run it")
			child := readPID(t, r)
			r.ctrl.mu.Lock()
			unit, cg := r.ctrl.st.exec.handle.Cohort.Unit, r.ctrl.st.exec.handle.Cohort.Cgroup
			r.ctrl.mu.Unlock()

			args := append([]string{"--user"}, external...)
			if out, err := exec.Command("systemctl", append(args, unit)...).CombinedOutput(); err != nil {
				t.Fatalf("systemctl %v: %v %s", external, err, out)
			}
			r.waitBinding("uncertain")
			waitGone(t, child)
			waitCgroupGone(t, cg)

			m := ctl.refused(map[string]any{"type": "recover", "request": "rv0", "generation": gen, "confirmation": "cf-none"}, protocol.CodeStopProof)
			if msg, _ := m["message"].(string); !strings.Contains(msg, "mosaicctl stop --take --yes") {
				t.Fatalf("recover's refusal names no way out: %q", msg)
			}
			cf := confirmSaying(t, ctl, gen, "its cgroup is gone")
			rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
			if rc["state"] != protocol.ReceiptStopped {
				t.Fatalf("force stop after the scope was stopped from outside: %v", rc)
			}
			if b := proofBasis(t, currentStop(r)); b != proofs.BasisCgroupRemoved {
				t.Fatalf("proof basis %q, want %s", b, proofs.BasisCgroupRemoved)
			}
			wayBack(t, r, ctl, gen)
		})
	}
}

// confirmSaying issues a force-stop confirmation, checks that the intent
// a person confirms says want, and answers it.
func confirmSaying(t *testing.T, ctl *peer, gen float64, want string) string {
	t.Helper()
	cf := ctl.must(map[string]any{"type": "issue-confirmation", "request": newID("ci-"), "operation": "force-stop", "generation": gen}, "confirmation")
	if intent, _ := cf["intent"].(string); !strings.Contains(intent, want) {
		t.Fatalf("force-stop intent %q does not say %q", intent, want)
	}
	ctl.must(map[string]any{"type": "answer-confirmation", "request": newID("ca-"), "confirmation": cf["id"], "answer": "confirm"}, "confirmation")
	return cf["id"].(string)
}

// TestRestartFinishesRemovedScope: the engine's scope was killed from
// outside and the controller ended before anyone force stopped it: the
// claim says uncertain. The next controller finds the cgroup gone and
// finishes a stop by itself, on the basis cgroup-removed, without
// signalling anything; recover then has a proof. On a build without the
// basis the restarted controller left the claim uncertain for good.
func TestRestartFinishesRemovedScope(t *testing.T) {
	r := newRig(t, toolChildScript, nil)
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	promptSettled(t, ctl, gen, "run it")
	child := readPID(t, r)
	r.ctrl.mu.Lock()
	unit, cg := r.ctrl.st.exec.handle.Cohort.Unit, r.ctrl.st.exec.handle.Cohort.Cgroup
	r.ctrl.mu.Unlock()
	if out, err := exec.Command("systemctl", "--user", "kill", "--signal=KILL", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl kill: %v %s", err, out)
	}
	r.waitBinding("uncertain")
	waitGone(t, child)
	// The restart must find the cgroup gone, which is what the test is
	// about: the processes' deaths come before systemd removes it, and a
	// restart before that (under load) found it present and empty and
	// proved the stop on that basis instead (empty-observed).
	waitCgroupGone(t, cg)
	r.ctrl.Close()
	r.ctrl.mu.Lock()
	rec := r.ctrl.st.claim.Record()
	r.ctrl.mu.Unlock()
	if rec.State != claims.Uncertain {
		t.Fatalf("claim %s after the engine exited without a stop; want uncertain", rec.State)
	}
	b, log := r.restart()
	s := waitStop(t, b)
	if s.State != "stopped" || proofBasis(t, s) != proofs.BasisCgroupRemoved {
		t.Fatalf("restarted controller's stop %+v; want stopped on the cgroup's removal", s)
	}
	b.mu.Lock()
	rec, binding := b.st.claim.Record(), b.st.binding
	b.mu.Unlock()
	if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest || binding != protocol.BindingStopped {
		t.Fatalf("after the restart: claim %s %+v, binding %s", rec.State, rec.Proof, binding)
	}
	for _, e := range log.entries(t) {
		if strings.Contains(e["MESSAGE"], "SIGTERM") {
			t.Fatalf("the restarted controller signalled: %v", e)
		}
	}
}

// waitCgroupGone waits for systemd to remove cgroup cg, which it does
// once the unit has stopped, after its processes died.
func waitCgroupGone(t *testing.T, cg string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat("/sys/fs/cgroup" + cg); errors.Is(err, os.ErrNotExist) {
			return
		} else if i == 500 {
			t.Fatalf("cgroup %s still there: %v", cg, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits for pid to be gone (reaped, or a zombie of another
// parent that is not ours to reap).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if !alive(pid) || zombie(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pid %d still alive", pid)
}

// zombie reports whether pid is a zombie: exited, not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(after, "Z")
}

// fullStore makes every claim write fail with ENOSPC while full is set, as
// a claims filesystem with no space left does (a fault hook at the write,
// not a small filesystem: the test user cannot mount one in the sandbox).
func fullStore(full *atomic.Bool) func(*Config) {
	return func(cfg *Config) {
		s, err := claims.Open(cfg.Claims.Root(), claims.WithFault(func(point, path string) error {
			if full.Load() && point == claims.FaultTempWritten {
				return syscall.ENOSPC
			}
			return nil
		}))
		if err != nil {
			panic(err)
		}
		cfg.Claims = s
		cfg.RecordRetry = 200 * time.Millisecond
	}
}

// TestStoppedRevisionRetried: a force stop proves the cohort gone while
// the claims filesystem is full (ENOSPC on the stopped revision). The
// proof is held, the stop stays stopping and the receipt says why, with
// no kill after it. Once the space is back, the claim reaches stopped
// with that proof and without a new kill, by this controller's retries or
// by a restarted controller that finds the scope gone; then the way back
// works. On a build without the retry the stop ended uncertain, freeing
// the space changed nothing, and a restarted controller inherited
// "cgroup absent".
func TestStoppedRevisionRetried(t *testing.T) {
	for _, mode := range []string{"space freed", "force stop writes it", "full before the stop began", "controller restarted, then space freed"} {
		t.Run(mode, func(t *testing.T) {
			var full atomic.Bool
			r := newRig(t, toolChildScript, fullStore(&full))
			r.waitBinding("active")
			ctl := r.dial()
			ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
			gen := r.takeover(ctl)
			promptSettled(t, ctl, gen, "run it")
			child := readPID(t, r)
			wantClaim := claims.Stopping
			if mode == "full before the stop began" {
				full.Store(true) // not even stopping can be recorded
				wantClaim = claims.Active
			} else {
				// The claim already says stopping; then the filesystem fills.
				r.ctrl.test.inKill = func() { full.Store(true) }
			}
			if mode == "force stop writes it" {
				gate := make(chan struct{})
				t.Cleanup(func() { close(gate) })
				r.ctrl.test.beforeRetry = func() { <-gate }
			}
			cf := ctl.confirm("force-stop", gen)
			rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
			if rc["state"] != protocol.ReceiptUncertain || !strings.Contains(rc["reason"].(string), "claim store refused") {
				t.Fatalf("force stop on a full claim store: %v; want the outcome open, naming the claim store", rc)
			}
			waitGone(t, child)
			held := currentStop(r)
			if held.State != "stopping" || r.waitBinding("stopping") == nil {
				t.Fatalf("stop %+v; want stopping while the proof is held", held)
			}
			r.ctrl.mu.Lock()
			rec := r.ctrl.st.claim.Record()
			r.ctrl.mu.Unlock()
			if rec.State != wantClaim {
				t.Fatalf("claim %s while the store is full; want %s", rec.State, wantClaim)
			}

			switch mode {
			case "force stop writes it":
				// Retries held back: the user's force stop writes the
				// held proof, and signals nothing.
				full.Store(false)
				cf := confirmSaying(t, ctl, gen, "nothing is killed")
				rc := ctl.must(map[string]any{"type": "force-stop", "request": "f2", "generation": gen, "confirmation": cf}, "receipt")
				if rc["state"] != protocol.ReceiptStopped || rc["stop"] != held.ID {
					t.Fatalf("force stop with a held proof: %v; want %s stopped", rc, held.ID)
				}
				fallthrough
			case "space freed", "full before the stop began":
				full.Store(false)
				r.waitBinding("stopped")
				s := currentStop(r)
				if s.ID != held.ID || s.State != "stopped" || proofBasis(t, s) != proofs.BasisEmptyObserved {
					t.Fatalf("stop %+v after the space came back; want %s stopped with the held proof", s, held.ID)
				}
				r.ctrl.mu.Lock()
				rec = r.ctrl.st.claim.Record()
				n := len(r.ctrl.stops.m)
				r.ctrl.mu.Unlock()
				if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest || n != 1 {
					t.Fatalf("claim %s proof %+v, %d stops; want stopped with %s by the one stop", rec.State, rec.Proof, n, s.ProofDigest)
				}
				for _, e := range r.audit.entries(t) {
					if strings.Contains(e["MESSAGE"], "SIGTERM") && e["MOSAIC_STOP"] != held.ID {
						t.Fatalf("signalled again: %v", e)
					}
				}
				wayBack(t, r, ctl, gen)
				return
			}

			r.ctrl.Close() // the retries give up; the journal keeps the proof
			journaled := false
			for _, e := range r.audit.entries(t) {
				journaled = journaled || e["MOSAIC_CLAIM_WRITE"] == "refused" && e["MOSAIC_STOP"] == held.ID && e["MOSAIC_PROOF"] != ""
			}
			if !journaled {
				t.Fatal("the held proof is not in the journal")
			}
			full.Store(false)
			b, log := r.restart()
			s := waitStop(t, b)
			if s.State != "stopped" || proofBasis(t, s) != proofs.BasisCgroupRemoved {
				t.Fatalf("restarted controller's stop %+v; want stopped on the cgroup's removal", s)
			}
			b.mu.Lock()
			rec = b.st.claim.Record()
			b.mu.Unlock()
			if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest {
				t.Fatalf("claim after the restart: %s %+v", rec.State, rec.Proof)
			}
			for _, e := range log.entries(t) {
				if strings.Contains(e["MESSAGE"], "SIGTERM") {
					t.Fatalf("the restarted controller signalled again: %v", e)
				}
			}
		})
	}
}
