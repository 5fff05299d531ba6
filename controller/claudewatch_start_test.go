package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// sentNone is a Claude engine that sent no prompt.
type sentNone struct{ engine.Driver }

func (sentNone) SentPrompt(string) bool { return false }

func (sentNone) Announced(string) (hclaude.Said, bool) { return hclaude.Said{}, false }

func (sentNone) Turn() engine.TurnSummary { return engine.TurnSummary{} }

// TestClaudeWatchStartsFromTheLaunch: the transcript watch starts from
// the bytes the launch checked (nil: a new session, no file), not from a
// read of its own: a prompt another writer put in a new session's
// transcript, or an entry it rewrote in place, after the load check and
// before the watch's start, is another writer's, never the watch's start
// and vouched for.
func TestClaudeWatchStartsFromTheLaunch(t *testing.T) {
	cases := []struct {
		name   string
		before []string // the transcript as the launch read it (nil: none)
		after  string   // the transcript when the watch starts
	}{
		{name: "a new session's transcript made", after: tline("prompt", "u1", "") + "\n"},
		{name: "an entry rewritten in place", before: []string{tline("prompt", "u1", ""), tline("assistant", "a1", "u1")},
			after: strings.Replace(tline("prompt", "u1", ""), `"hi"`, `"HI"`, 1) + "\n" + tline("assistant", "a1", "u1") + "\n"},
		{name: "an assistant line the engine never announced", before: []string{tline("prompt", "u1", ""), tline("assistant", "a1", "u1")},
			after: tline("prompt", "u1", "") + "\n" + tline("assistant", "a1", "u1") + "\n" + tline("assistant", "f1", "a1") + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			store, err := claims.Open(filepath.Join(root, "state", "claims"))
			if err != nil {
				t.Fatal(err)
			}
			cv := &conversations.Conversation{ID: "pi-00000000000000000000", Project: "/work/p", EngineKind: engine.KindClaude,
				Claude: &conversations.Claude{Session: watchSession}}
			c := New(Config{Claims: store, Conversation: cv, PollInterval: 10 * time.Millisecond, Audit: audit.NewWriter(cv.ID, &syncBuffer{})})
			ref := c.claudeRef(cv)
			path, err := ref.Path()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			var from *hclaude.Transcript
			if tc.before != nil {
				if err := os.WriteFile(path, []byte(strings.Join(tc.before, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if from, err = hclaude.Read(ref); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tc.after); err != nil {
				t.Fatal(err)
			}
			f.Close()
			x := &execution{id: "x1", conn: sentNone{}}
			c.mu.Lock()
			c.st.exec, c.st.binding, c.st.admission = x, protocol.BindingActive, true
			c.mu.Unlock()
			done := make(chan struct{})
			go func() { defer close(done); c.watchClaude(x, "", false, from) }()
			defer func() {
				c.mu.Lock()
				x.exited = true
				c.mu.Unlock()
				<-done
			}()
			deadline := time.Now().Add(2 * time.Second)
			for {
				c.mu.Lock()
				closed := !c.st.admission
				c.mu.Unlock()
				if closed {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("admission still open; the watch vouched for %+v", x.vouched.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if v, sum := x.vouched.Load(), sha256.Sum256([]byte(tc.after)); v != nil && v.SHA256 == hex.EncodeToString(sum[:]) {
				t.Fatalf("the watch vouched for the other writer's bytes (%+v)", v)
			}
		})
	}
}
