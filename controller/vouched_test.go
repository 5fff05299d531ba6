package controller

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestHistoryChange: the session file compared with the bytes a stopped
// revision vouched for: the same bytes, bytes appended (a line without
// its LF too: Pi loads it), bytes rewritten in place with the size, the
// header and the leaf kept, a shorter file, a missing one. A revision
// that recorded nothing (an older mosaic's) is always the same: the
// header and leaf checks are all there is, as before.
func TestHistoryChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	writeSession(t, path, "/p", 4)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, err := readSessionHead(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &claims.Record{Vouched: fileState(head.snap)}
	if rec.Vouched.Size != int64(len(orig)) {
		t.Fatalf("vouched %d bytes of %d", rec.Vouched.Size, len(orig))
	}
	for _, tc := range []struct {
		name string
		data []byte // nil: no file
		want string
	}{
		{"the same bytes", orig, historySame},
		{"an entry appended", append(bytes.Clone(orig), []byte(`{"type":"message","id":"x1","parentId":"m00003","timestamp":"2026-12-01T00:00:02.000Z","message":{"role":"user","content":[{"type":"text","text":"forged"}]}}`+"\n")...), historyAppended},
		{"a line without its LF", append(bytes.Clone(orig), []byte(`{"type":"message","id":"x1"`)...), historyAppended},
		{"rewritten in place", bytes.Replace(orig, []byte("message 0"), []byte("FORGED!!!"), 1), historyRewritten},
		{"shortened", orig[:bytes.Index(orig, []byte(`{"type":"message","id":"m00003"`))], historyRewritten},
		{"missing", nil, historyRewritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if tc.data != nil {
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h, err := readSessionHead(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "rewritten in place" && (h.leaf != head.leaf || h.id != head.id || h.snap.Size() != head.snap.Size()) {
				t.Fatalf("the rewrite changed the header, leaf or size: the test is not about a rewrite in place")
			}
			if got := historyChange(rec, h); got != tc.want {
				t.Fatalf("change %q, want %q", got, tc.want)
			}
			if got := historyChange(&claims.Record{}, h); got != historySame {
				t.Fatalf("a revision that recorded nothing: change %q, want none", got)
			}
		})
	}
	// A stop that vouched for no file: one appearing since holds bytes
	// after none (the engine's lazy first write after the last check, or
	// another writer's).
	none := &claims.Record{Vouched: fileState(nil)}
	os.Remove(path)
	if h, err := readSessionHead(path); err != nil || historyChange(none, h) != historySame {
		t.Fatalf("no file, none vouched: %v %q", err, historyChange(none, h))
	}
	os.WriteFile(path, orig, 0o600)
	if h, _ := readSessionHead(path); historyChange(none, h) != historyAppended {
		t.Fatalf("a file where none was vouched: change %q", historyChange(none, h))
	}
}

// TestRecoverRefusesARewrittenHistory: a force stop records the bytes the
// session watch last vouched for; an earlier message rewritten in place
// afterwards (same size, header and leaf) makes the recover intent say
// it refuses, and the recover refuse target naming the change and the way
// on. With the bytes put back, the same stop recovers.
func TestRecoverRefusesARewrittenHistory(t *testing.T) {
	r, k, gen, _ := settledTurn(t, nil)
	// The watch vouches for the turn's appends (TestLeafFollowsOwnAppends).
	for deadline := time.Now().Add(30 * time.Second); ; sleep20() {
		snap, err := history.Read(r.session, history.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r.ctrl.mu.Lock()
		x := r.ctrl.st.exec
		r.ctrl.mu.Unlock()
		if v := x.vouched.Load(); v != nil && v.Size == snap.Size() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session watch never vouched for the whole file")
		}
	}
	cf := k.confirm("force-stop", gen)
	if rc := k.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != "stopped" {
		t.Fatalf("force stop %v", rc)
	}
	orig, err := os.ReadFile(r.session)
	if err != nil {
		t.Fatal(err)
	}
	r.ctrl.mu.Lock()
	rec := r.ctrl.st.claim.Record()
	r.ctrl.mu.Unlock()
	snap, _ := history.Read(r.session, history.Options{})
	if v := rec.Vouched; v == nil || v.Size != snap.Size() || v.SHA256 != snap.Digest() {
		t.Fatalf("stopped revision vouched %+v; want the file's %d bytes, sha256 %s", v, snap.Size(), snap.Digest())
	}
	i := bytes.Index(orig, []byte(`"hello"`))
	if i < 0 {
		t.Fatalf("the prompt is not in the session file:\n%s", orig)
	}
	forged := bytes.Clone(orig)
	copy(forged[i:], `"HELLO"`)
	if err := os.WriteFile(r.session, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	icf := k.must(map[string]any{"type": "issue-confirmation", "request": "ci", "operation": "recover", "generation": gen}, "confirmation")
	if intent := icf["intent"].(string); !strings.Contains(intent, "no longer begins with") || !strings.Contains(intent, "the recover refuses") {
		t.Fatalf("recover intent %q does not say the history changed and the recover refuses", intent)
	}
	k.must(map[string]any{"type": "answer-confirmation", "request": "ca", "confirmation": icf["id"], "answer": "confirm"}, "confirmation")
	m := k.refused(map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": icf["id"]}, protocol.CodeTarget)
	if msg := m["message"].(string); !strings.Contains(msg, "another writer changed the history") || !strings.Contains(msg, "Put the recorded bytes back") {
		t.Fatalf("refusal %q does not name the change and the way on", msg)
	}
	if err := os.WriteFile(r.session, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	icf = k.must(map[string]any{"type": "issue-confirmation", "request": "ci2", "operation": "recover", "generation": gen}, "confirmation")
	if intent := icf["intent"].(string); !strings.Contains(intent, "the same session") {
		t.Fatalf("recover intent %q with the bytes back", intent)
	}
	k.must(map[string]any{"type": "answer-confirmation", "request": "ca2", "confirmation": icf["id"], "answer": "confirm"}, "confirmation")
	k.must(map[string]any{"type": "recover", "request": "rv2", "generation": gen, "confirmation": icf["id"]}, "eligibility")
}
