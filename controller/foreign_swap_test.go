package controller

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSymlinkSwapIsForeign: the session path replaced by a symlink to an
// edited copy (Pi's appends by path would follow it into another file) is
// a foreign writer: the history reader refuses unsafe-path, and the watch
// closes admission on any refusal, not only source-replaced.
func TestSymlinkSwapIsForeign(t *testing.T) {
	r := newRig(t, plainScript, func(c *Config) { writeSession(t, c.Conversation.Session, c.Conversation.Project, 3) })
	r.waitBinding("active")
	ctl := r.dial()
	r.takeover(ctl)
	b, err := os.ReadFile(r.session)
	if err != nil {
		t.Fatal(err)
	}
	other := r.session + ".other"
	if err := os.WriteFile(other, append(b, b[len(b)-200:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	link := r.session + ".lnk"
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, r.session); err != nil {
		t.Fatal(err)
	}
	b2 := r.waitBinding("uncertain")
	if b2["admission"] != "closed" || !strings.Contains(fmt.Sprint(b2["admissionReason"]), "unsafe-path") {
		t.Fatalf("binding after the swap: %v; want admission closed for unsafe-path", b2)
	}
}
