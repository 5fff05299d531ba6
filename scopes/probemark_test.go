package scopes

import (
	"context"
	"os"
	"path/filepath"
	"testing"
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
