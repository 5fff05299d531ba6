package scopes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeMark: a passed probe is remembered for this boot only, in a
// 0600 file of a 0700 directory; a Manager takes the mark instead of
// probing, and a confined launch's failure removes it and makes such a
// Manager probe again, while a Manager's own probe is kept for its life.
func TestProbeMark(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	path := filepath.Join(rt, "mosaic", probeMarkName)
	if probeMarked() {
		t.Fatal("marked before any probe")
	}
	markProbed()
	if !probeMarked() {
		t.Fatal("not marked after markProbed")
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if st, err := os.Stat(p); err != nil || st.Mode() != want {
			t.Fatalf("%s: %v, %v; want mode %v", p, st.Mode(), err, want)
		}
	}

	t.Run("another boot", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("00000000-0000-0000-0000-000000000000\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if probeMarked() {
			t.Fatal("a mark of another boot counted")
		}
		markProbed()
	})

	t.Run("a Manager takes the mark and forgets it on failure", func(t *testing.T) {
		m := NewManager(Config{BusAddress: "unix:path=/nonexistent"})
		defer m.Close()
		if ok, why := m.confinementAvailable(context.Background()); !ok || !m.probedByMark {
			t.Fatalf("confinementAvailable = %v (%s), by mark %v; want the mark taken", ok, why, m.probedByMark)
		}
		m.forgetProbe()
		if probeMarked() || m.probed {
			t.Fatalf("after a failed confined launch: marked %v, probed %v; want neither", probeMarked(), m.probed)
		}
	})

	t.Run("a Manager's own probe is kept", func(t *testing.T) {
		markProbed()
		m := NewManager(Config{BusAddress: "unix:path=/nonexistent"})
		defer m.Close()
		m.probed = true // as after a probe of its own
		m.forgetProbe()
		if probeMarked() || !m.probed {
			t.Fatalf("marked %v, probed %v; want the mark gone and the Manager's probe kept", probeMarked(), m.probed)
		}
	})
}

// TestMarkedButRefused: with the probe's mark as its only evidence and
// the kernel refusing the held child's namespaces, a launch decides as
// one without a mark does, by a probe, before any scope exists: the probe
// refused too, the engine runs unconfined with the probe's reason; the
// probe passing, the launch fails, as one whose own set-up failed after a
// passed probe, and the next launch is confined.
func TestMarkedButRefused(t *testing.T) {
	refused := errors.New("test: user namespaces refused")
	for _, tc := range []struct {
		name    string
		refuses int // how many confined starts are refused (the launch's first, then the probe's)
	}{{"probe refused too", 1 << 30}, {"probe passes", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManager(t)
			t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
			markProbed()
			calls := 0
			m.faults.refuseHeld = func(confined bool) error {
				if !confined {
					return nil
				}
				calls++
				if calls <= tc.refuses {
					return refused
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			launch := func() (*Handle, error) {
				conv, exe := ids(t)
				h, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"true"}, Stderr: os.Stderr})
				if err == nil {
					t.Cleanup(func() {
						h.Abandon(context.Background())
						h.Close()
					})
				}
				return h, err
			}
			h, err := launch()
			if tc.refuses > 1 {
				if err != nil {
					t.Fatalf("launch: %v; want it unconfined", err)
				}
				if c := h.Cohort.Confinement; c.Confined || !strings.Contains(c.Reason, refused.Error()) {
					t.Fatalf("confinement %+v; want unconfined with the probe's reason", c)
				}
				if probeMarked() {
					t.Fatal("the mark survived a refused probe")
				}
				return
			}
			if !errors.Is(err, refused) {
				t.Fatalf("launch: %v; want the refusal (a probe passed)", err)
			}
			if calls != 2 || m.probedByMark || !m.probed {
				t.Fatalf("%d confined starts, probed %v (by mark %v); want the launch's and the probe's, probed by this Manager", calls, m.probed, m.probedByMark)
			}
			if h, err = launch(); err != nil || !h.Cohort.Confinement.Confined {
				t.Fatalf("next launch: %v, %+v; want it confined", err, h)
			}
		})
	}
	// A Manager whose first launch trusted the mark and was confined has
	// its own evidence then: a later refusal fails the launch (no probe,
	// no unconfined engine), as for a Manager that probed itself.
	t.Run("refused after a confined launch", func(t *testing.T) {
		m := testManager(t)
		t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
		markProbed()
		refuse := false
		m.faults.refuseHeld = func(confined bool) error {
			if confined && refuse {
				return refused
			}
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conv, exe := ids(t)
		h, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"true"}, Stderr: os.Stderr})
		if err != nil || !h.Cohort.Confinement.Confined {
			t.Fatalf("first launch: %v; want it confined on the mark", err)
		}
		t.Cleanup(func() { h.Abandon(context.Background()); h.Close() })
		refuse = true
		conv, exe = ids(t)
		h2, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"true"}, Stderr: os.Stderr})
		if err == nil {
			t.Cleanup(func() { h2.Abandon(context.Background()); h2.Close() })
			t.Fatalf("launch after a refusal: %+v; want it to fail closed", h2.Cohort.Confinement)
		}
		if !errors.Is(err, refused) {
			t.Fatalf("launch after a refusal: %v; want the refusal", err)
		}
	})
}
