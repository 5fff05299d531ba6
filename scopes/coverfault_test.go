package scopes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// TestCoverPathFailsClosed: what a tool can do to the paths the next
// engine's confinement covers never starts that engine unconfined. A
// parent made unreadable (chmod 000 ~/.local/share) is still covered,
// the engine confined; a covered path made a link loop fails the launch
// (ErrCoverPath), as does a link to nothing (where a tool would make the
// target later, unmasked), and so does the launch of a fresh Manager, which before
// probed again, found confinement "unavailable" and ran the engine with
// no namespaces and no masks at all.
func TestCoverPathFailsClosed(t *testing.T) {
	m := testManager(t)
	data, err := xdg.DataHome()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := xdg.ConfigHome()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "systemd"), 0o700); err != nil {
		t.Fatal(err)
	}
	launch := func(m *Manager) (*Handle, error) {
		t.Helper()
		conv, exe := ids(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"sh", "-c", "echo ready; exec cat"}, Stderr: os.Stderr,
			Resources: Resources{MemoryMax: 1 << 30, TasksMax: 1024, CPUQuota: 200}})
		if err == nil {
			t.Cleanup(func() {
				h.Abandon(context.Background())
				h.Close()
			})
		}
		return h, err
	}

	t.Run("unreadable parent", func(t *testing.T) {
		if err := os.Chmod(data, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(data, 0o755)
		h, err := launch(m)
		if err != nil {
			t.Fatalf("launch with %s at mode 000: %v", data, err)
		}
		if c := h.Cohort.Confinement; !c.Confined {
			t.Fatalf("engine unconfined: %s", c.Reason)
		}
	})

	t.Run("link leading nowhere", func(t *testing.T) {
		// The directory a tool would make at the target later is
		// reached through the link outside: not absent, a fault.
		link := filepath.Join(cfg, "autostart")
		if err := os.RemoveAll(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(t.TempDir(), "later"), link); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(link)
		if h, err := launch(m); !errors.Is(err, ErrCoverPath) {
			t.Fatalf("launch with %s a link to nothing: %v (handle %v), want ErrCoverPath", link, err, h != nil)
		}
	})

	t.Run("link loop", func(t *testing.T) {
		loop := filepath.Join(cfg, "autostart")
		if err := os.RemoveAll(loop); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("autostart", loop); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(loop)
		for i, mm := range []*Manager{m, NewManager(Config{})} {
			if i > 0 {
				// A fresh controller, with no mark of a probe that passed
				// this boot: it probes, and the probe meets the loop too.
				unmarkProbed()
				defer mm.Close()
			}
			h, err := launch(mm)
			if err == nil {
				t.Fatalf("launch %d with %s a link loop: started, confined %v (%s)", i, loop, h.Cohort.Confinement.Confined, h.Cohort.Confinement.Reason)
			}
			if !errors.Is(err, ErrCoverPath) {
				t.Fatalf("launch %d with %s a link loop: %v, want ErrCoverPath", i, loop, err)
			}
		}
	})
}
