package scopes

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// A probe that passed is remembered for the boot in the user's runtime
// directory ($XDG_RUNTIME_DIR/mosaic/confinement-probed, holding the boot
// id), so each controller, one process per conversation, does not start a
// throwaway held child before its first launch (a re-executed program, its
// namespaces and masks: 7–15 ms of a 20 ms launch on a busy two-CPU
// machine).
//
// The mark only ever makes a launch try confinement; it can never make an
// engine run unconfined, nor stand in for evidence: every confined launch
// still sets its confinement up in its own held child and records what the
// kernel shows of it before the engine runs. With a forged or stale mark
// (the host stopped allowing user namespaces after the probe) the kernel
// refuses the held child's namespaces: the mark is removed and the launch
// probes, as one without a mark does, before any scope exists. If the
// namespaces are made but the set-up inside them fails, the launch fails
// (the engine never runs) and the mark is removed, so the next launch
// probes again.
// The directory is masked from every engine, and a failure is never
// remembered, as in a Manager.

const probeMarkName = "confinement-probed"

// probeMarkPath is where the mark lives; ok is false without a runtime
// directory.
func probeMarkPath() (string, bool) {
	rt, err := xdg.RuntimeDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(rt, "mosaic", probeMarkName), true
}

// probeMarked reports whether a probe passed earlier in this boot.
func probeMarked() bool {
	p, ok := probeMarkPath()
	if !ok {
		return false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	boot, err := procfs.BootID()
	return err == nil && boot != "" && strings.TrimSpace(string(b)) == boot
}

// markProbed remembers a passed probe for the boot, best effort: without
// the mark the next process probes again.
func markProbed() {
	p, ok := probeMarkPath()
	if !ok {
		return
	}
	boot, err := procfs.BootID()
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+probeMarkName+".*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(boot + "\n")
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), p) != nil {
		os.Remove(tmp.Name())
	}
}

// unmarkProbed forgets the mark.
func unmarkProbed() {
	if p, ok := probeMarkPath(); ok {
		os.Remove(p)
	}
}

// forgetProbe is called when a confined launch's own set-up failed: the
// host may have changed since the probe the mark remembers. Other
// processes probe again, and so does this Manager if the mark was its only
// evidence (a probe of its own is kept for its life, as before), which it
// reports.
func (m *Manager) forgetProbe() bool {
	unmarkProbed()
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	byMark := m.probedByMark
	if byMark {
		m.probed, m.probedByMark = false, false
	}
	return byMark
}

// confirmProbe makes a confined engine set up by this Manager its own
// evidence that engines can be confined here, as a probe of its own is: a
// later launch whose namespaces are refused then fails, as it did before
// the mark existed, instead of probing again and starting the engine
// unconfined (a sibling engine using up user.max_user_namespaces must not
// be able to unconfine the next launch).
func (m *Manager) confirmProbe() {
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	m.probedByMark = false
}
