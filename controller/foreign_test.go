package controller

import (
	"bytes"
	"os"
	"testing"
)

// W10, the file rewritten rather than appended to: a session file that no
// longer continues the one the engine loaded (here replaced by a copy
// with an earlier message edited, as a second writer's rewrite leaves it)
// closes admission with a reconcile marker, though no new entry id
// appeared.
func TestRewrittenSessionIsForeign(t *testing.T) {
	r := newRig(t, plainScript, func(c *Config) { writeSession(t, c.Conversation.Session, c.Conversation.Project, 3) })
	r.waitBinding("active")
	ctl := r.dial()
	gen := r.takeover(ctl)
	b, err := os.ReadFile(r.session)
	if err != nil {
		t.Fatal(err)
	}
	rewritten := bytes.Replace(b, []byte(`"message 1"`), []byte(`"message 1, edited"`), 1)
	if bytes.Equal(rewritten, b) {
		t.Fatal("the fixture has no message 1 to edit")
	}
	tmp := r.session + ".tmp"
	if err := os.WriteFile(tmp, rewritten, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.session); err != nil {
		t.Fatal(err)
	}
	ctl.await(func(m map[string]any) bool { return m["record"] == "notice" && m["kind"] == "foreign-writer" })
	if b := r.waitBinding("uncertain"); b["admission"] != "closed" || b["reconcile"] != true {
		t.Fatalf("after a rewrite: %v", b)
	}
	ctl.refused(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "more"}, CodeFenced)
}
