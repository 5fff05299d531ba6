package controller

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// W10, the file replaced rather than appended to: a session file that no
// longer continues the one the engine loaded closes admission with a
// reconcile marker, though no new entry id appeared. Rewritten: a copy
// with an earlier message edited, as a second writer's rewrite leaves it
// (source-replaced). Symlink: the path swapped for a link to an extended
// copy, which Pi's appends by path would follow into another file
// (unsafe-path). In place: the same size with the modification time set
// back (only the change time shows it), or stores through a shared
// mapping (no stat field shows it: the watch's periodic read does).
func TestReplacedSessionIsForeign(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		swap       func(t *testing.T, path string, b []byte)
		// statOnly makes the watch read the file only when a stat field
		// moved, so the case shows that the field it changes is looked at.
		statOnly bool
	}{
		{"rewritten", "source-replaced", func(t *testing.T, path string, b []byte) {
			rewritten := bytes.Replace(b, []byte(`"message 1"`), []byte(`"message 1, edited"`), 1)
			if bytes.Equal(rewritten, b) {
				t.Fatal("the fixture has no message 1 to edit")
			}
			replace(t, path, path+".tmp", func(tmp string) error { return os.WriteFile(tmp, rewritten, 0o644) })
		}, false},
		{"rewritten in place, times kept", "source-replaced", func(t *testing.T, path string, b []byte) {
			// Same size and modification time: only the change time,
			// which no writer can set back, shows it.
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * 100 * time.Millisecond) // the watch has seen the file as it was
			rewritten := bytes.Replace(b, []byte(`"message 1"`), []byte(`"message X"`), 1)
			if bytes.Equal(rewritten, b) {
				t.Fatal("the fixture has no message 1 to edit")
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(rewritten, 0)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"rewritten in place through a shared mapping", "source-replaced", func(t *testing.T, path string, b []byte) {
			// A store to a page already dirtied through a shared
			// mapping changes neither the size nor either time: the
			// first store's fault stamps them, the watch reads the
			// file as it was, and the rewrite after it stamps nothing.
			rewritten := bytes.Replace(b, []byte(`"message 1"`), []byte(`"message X"`), 1)
			if bytes.Equal(rewritten, b) {
				t.Fatal("the fixture has no message 1 to edit")
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := syscall.Mmap(int(f.Fd()), 0, len(b), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Munmap(m)
			copy(m, b)
			time.Sleep(3 * 100 * time.Millisecond) // the watch has seen the file as it was
			copy(m, rewritten)
		}, false},
		{"symlink", "unsafe-path", func(t *testing.T, path string, b []byte) {
			other := path + ".other"
			if err := os.WriteFile(other, append(b, b[len(b)-200:]...), 0o644); err != nil {
				t.Fatal(err)
			}
			replace(t, path, path+".lnk", func(link string) error { return os.Symlink(other, link) })
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hook func(*Controller)
			if tc.statOnly {
				hook = func(c *Controller) { c.test.recheckPolls = math.MaxInt }
			}
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := newRigAt(t, dir, plainScript, func(c *Config) { writeSession(t, c.Conversation.Session, c.Conversation.Project, 3) }, hook)
			r.waitBinding("active")
			ctl := r.dial()
			gen := r.takeover(ctl)
			b, err := os.ReadFile(r.session)
			if err != nil {
				t.Fatal(err)
			}
			tc.swap(t, r.session, b)
			ctl.await(func(m map[string]any) bool { return m["record"] == "notice" && m["kind"] == "foreign-writer" })
			bd := r.waitBinding("uncertain")
			if bd["admission"] != "closed" || bd["reconcile"] != true || !strings.Contains(fmt.Sprint(bd["admissionReason"]), tc.code) {
				t.Fatalf("after the swap: %v; want admission closed for %s, reconcile", bd, tc.code)
			}
			ctl.refused(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "more"}, protocol.CodeFenced)
		})
	}
}

// replace makes tmp with create, then renames it over path.
func replace(t *testing.T, path, tmp string, create func(string) error) {
	t.Helper()
	if err := create(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// W10 and Pi's first write: Pi creates a new session file and writes its
// header in a second call, so a poll may find it empty. That is a file
// being created, not a foreign write; a header that never comes is.
func TestSessionBeingCreated(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		r := newRig(t, plainScript, nil)
		r.waitBinding("active")
		ctl, obs := r.dial(), r.dial()
		obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
		gen := r.takeover(ctl)
		if err := os.WriteFile(r.session, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * 100 * time.Millisecond) // five polls find it empty
		if st, why := r.bindingNow(); st != "active" {
			t.Fatalf("binding %s (%s) while the header is being written; want active", st, why)
		}
		// The fake creates the file itself ("wx"), as Pi does.
		if err := os.Remove(r.session); err != nil {
			t.Fatal(err)
		}
		ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hi"}, "receipt")
		obs.settled()
		time.Sleep(3 * 100 * time.Millisecond)
		if st, why := r.bindingNow(); st != "active" || !strings.Contains(sessionText(t, r), `"type":"session"`) {
			t.Fatalf("binding %s (%s) after the first turn; want active over a written session", st, why)
		}
	})
	t.Run("never written", func(t *testing.T) {
		r := newRig(t, plainScript, nil)
		r.waitBinding("active")
		ctl := r.dial()
		if err := os.WriteFile(r.session, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		ctl.await(func(m map[string]any) bool { return m["record"] == "notice" && m["kind"] == "foreign-writer" })
		bd := r.waitBinding("uncertain")
		if !strings.Contains(fmt.Sprint(bd["admissionReason"]), protocol.CodeIncompleteHeader) {
			t.Fatalf("binding %v; want admission closed for incomplete-header", bd)
		}
	})
}

// bindingNow is the binding's state and admission reason at this moment.
func (r *rig) bindingNow() (state, reason string) {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	b := r.ctrl.bindingLocked()
	return b.State, b.AdmissionReason
}
