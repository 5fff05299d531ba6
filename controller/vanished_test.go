package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRecoverAfterTheSessionFileVanished: a conversation added before its
// session file existed is keyed new:<id>. Once its engine wrote the file
// (Pi does so lazily, after the first answer) and the file went away, a
// recover would have launched Pi on the path again, which starts a new,
// empty session under a new id while the intent said it resumed "the
// same session and leaf" (the leaf Pi had in memory). It is refused,
// target, naming the file and the fix, after a controller restart too
// (the evidence is the stopped revision's Written, not memory). A
// conversation never answered wrote no file and still recovers as new.
// Mutant 307 removes the missing-file check.
func TestRecoverAfterTheSessionFileVanished(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered bool // a prompt ran, so the engine wrote the file
		restart  bool // a new controller serves before the recover
	}{
		{"written then moved away", true, false},
		{"written then moved away, controller restarted", true, true},
		{"never answered", false, false},
		{"never answered, controller restarted", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, plainScript, nil)
			r.waitBinding("active")
			ctl := r.dial()
			ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
			gen := r.takeover(ctl)
			if tc.answered {
				ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hello"}, "receipt")
				ctl.settled()
				r.waitWritten()
				if err := os.Rename(r.session, filepath.Join(filepath.Dir(r.session), "..", "moved.jsonl")); err != nil {
					t.Fatal(err)
				}
			}
			r.ctrl.mu.Lock()
			memLeaf := r.ctrl.st.leaf
			r.ctrl.mu.Unlock()
			if memLeaf == "" {
				t.Fatal("the engine reported no leaf: the test cannot tell the in-memory leaf from the file's")
			}
			cf := ctl.confirm("force-stop", gen)
			if rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != "stopped" {
				t.Fatalf("force stop receipt %v", rc)
			}
			if _, err := os.Stat(r.session); !os.IsNotExist(err) {
				t.Fatalf("the session file: %v, want it missing", err)
			}
			if tc.restart {
				r.restartServed(nil, nil)
				r.waitBinding("stopped")
				ctl = r.dial()
				ctl.must(map[string]any{"type": "observe", "request": "o2"}, "observed")
				gen = r.recoveryControl(ctl)
			}

			icf := ctl.must(map[string]any{"type": "issue-confirmation", "request": "ci", "operation": "recover", "generation": gen}, "confirmation")
			intent := icf["intent"].(string)
			if strings.Contains(intent, memLeaf) || strings.Contains(intent, "same session") {
				t.Fatalf("recover intent %q claims the leaf %s the engine had in memory: the file holds no leaf", intent, memLeaf)
			}
			wantIntent := "starts a new session at " + r.session
			if tc.answered {
				wantIntent = "the session file " + r.session + " is missing"
			}
			if !strings.Contains(intent, wantIntent) {
				t.Fatalf("recover intent %q, want it to say %q", intent, wantIntent)
			}
			ctl.must(map[string]any{"type": "answer-confirmation", "request": "ca", "confirmation": icf["id"], "answer": "confirm"}, "confirmation")
			rv := map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": icf["id"]}
			if !tc.answered {
				el := ctl.must(rv, "eligibility")
				if el["leaf"] != "" || el["sessionId"] != nil && el["sessionId"] != "" {
					t.Fatalf("eligibility %v, want a new session (no id, no leaf)", el)
				}
				lr := ctl.must(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, "receipt")
				if lr["state"] != protocol.ReceiptLaunched {
					t.Fatalf("launch receipt %v", lr)
				}
				return
			}
			msg := ctl.refused(rv, protocol.CodeTarget)["message"].(string)
			for _, want := range []string{"wrote to " + r.session + ", is missing there", "Put the file back", "`mosaicctl conv rm " + r.cfg.Conversation.ID + "`, then `mosaicctl conv add` with those settings and a new --session file name"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("refusal %q does not say %q", msg, want)
				}
			}
			r.ctrl.mu.Lock()
			rec := r.ctrl.st.claim.Record()
			r.ctrl.mu.Unlock()
			if rec.Session != "new:"+r.cfg.Conversation.ID || rec.Written == "" {
				t.Fatalf("claim keyed %s, written %q: want new:<id> with the engine's session", rec.Session, rec.Written)
			}
		})
	}
}

// waitWritten waits until the session watch saw the engine's session
// file, the evidence a stop records.
func (r *rig) waitWritten() {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.ctrl.mu.Lock()
		w := r.ctrl.st.written
		r.ctrl.mu.Unlock()
		if w != "" {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the session watch never saw the engine's session file")
		}
		sleep20()
	}
}
