package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	engines "github.com/mosaic-agents/mosaic/engine"
)

// TestHandedFDIsTheEngines: the held child hands Spec.Dirs at the
// descriptors engine.HandedDir names to the engine.
func TestHandedFDIsTheEngines(t *testing.T) {
	if handedFD != engines.FirstHandedFD || engines.HandedDir(1) != fmt.Sprintf("/proc/self/fd/%d", handedFD+1) {
		t.Fatalf("handedFD %d, engines.HandedDir(1) %s: the engine would name another descriptor", handedFD, engines.HandedDir(1))
	}
}

// handedEngine reads and writes its handed directory (%[1]s's own.json)
// through its descriptor and by its path; then, as its tools, through
// the tool shell: by the descriptor it inherited, through the engine's
// own descriptor table, and by the path; then the same two through plain
// bash, the controls. Each line says 0 when the attempt succeeded.
const handedEngine = shProbe + `
probe fd 'cat /proc/self/fd/3/own.json'
probe write 'echo mine > /proc/self/fd/3/new.json'
probe sealedread 'cat /proc/self/fd/3/sealed.json'
probe sealedwrite 'echo "{\"x\":1}" > /proc/self/fd/3/sealed.json'
probe sealedrm 'rm -f /proc/self/fd/3/sealed.json'
probe sealedmv 'echo x > /proc/self/fd/3/x && mv -f /proc/self/fd/3/x /proc/self/fd/3/sealed.json'
probe sibling 'cat /proc/self/fd/3/../conv-sibling/secret.json'
probe above 'test -d /proc/self/fd/3/../../%[2]s'
probe parent 'test -e /proc/self/fd/3/../own.json'
probe sealedmount 'unshare -Urm sh -c "umount /proc/self/fd/3/sealed.json && echo y > /proc/self/fd/3/sealed.json"'
probe path 'cat %[1]s/own.json'
probe tool '/dev/mosaic-bash -c "cat /proc/self/fd/3/own.json"'
probe toolengine '/dev/mosaic-bash -c "cat /proc/\$PPID/fd/3/own.json"'
probe toolplant '/dev/mosaic-bash -c "echo x > /proc/\$PPID/fd/3/auth.json"'
probe toolpath '/dev/mosaic-bash -c "cat %[1]s/own.json"'
probe plain 'bash -c "cat /proc/self/fd/3/own.json"'
probe plainengine 'bash -c "cat /proc/\$PPID/fd/3/own.json"'
echo ready 1
exec sleep 300
`

// TestHandedDirIsTheEnginesAlone: a directory under a hidden one handed
// to a confined engine (Spec.Dirs, as Pi's agent directory is) is the
// engine's to read and write through its descriptor while its path shows
// the mask, and a tool the tool shell runs reaches it by no way: not by
// the descriptor it would inherit, not through its engine's, not by the
// path. Plain bash, which inherits the descriptor, reads it: the tool
// shell's drop and domain are what keep the tool out.
func TestHandedDirIsTheEnginesAlone(t *testing.T) {
	if why := toolsNestable(); why != "" {
		t.Skip(why)
	}
	m := testManager(t)
	all := filepath.Join(t.TempDir(), "agent")
	own := filepath.Join(all, "conv-own")
	if err := os.MkdirAll(own, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"own.json", "sealed.json", "../conv-sibling/secret.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(own, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(own, f), []byte(`{"k":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sealed := filepath.Join(own, "sealed.json")
	e := launchWith(t, m, fmt.Sprintf(handedEngine, own, filepath.Base(all)), func(s *Spec) {
		s.Hide, s.Dirs, s.Sealed = []string{all}, []string{own}, []string{sealed}
	})
	got := e.expect(t, "fd", "write", "sealedread", "sibling", "above", "parent", "sealedwrite", "sealedrm", "sealedmv", "sealedmount",
		"path", "tool", "toolengine", "toolplant", "toolpath", "plain", "plainengine", "ready")
	requireConfined(t, e)
	if e.Cohort.Confinement.ToolShell == "" {
		t.Fatalf("no tool shell in the engine's view: %s", e.Cohort.Confinement.Unnested)
	}
	if got["fd"] != "0" || got["write"] != "0" {
		t.Errorf("the engine lost its handed directory: read %s, write %s", got["fd"], got["write"])
	}
	if b, err := os.ReadFile(filepath.Join(own, "new.json")); err != nil || string(b) != "mine\n" {
		t.Errorf("the engine's write through its descriptor did not land: %q, %v", b, err)
	}
	if got["sealedread"] != "0" {
		t.Error("the engine cannot read its sealed file")
	}
	// .. from the descriptor stays in the directory (the root of a
	// detached mount), never the directories beside it or above.
	if got["sibling"] == "0" || got["above"] == "0" {
		t.Errorf("the handed directory's .. leads out of it: sibling %s, above %s", got["sibling"], got["above"])
	}
	if got["parent"] != "0" {
		t.Error("the handed directory's .. is not the directory itself")
	}
	for _, k := range []string{"sealedwrite", "sealedrm", "sealedmv", "sealedmount"} {
		if got[k] == "0" {
			t.Errorf("%s: the engine changed its sealed file", k)
		}
	}
	if b, err := os.ReadFile(sealed); err != nil || string(b) != `{"k":1}` {
		t.Errorf("the sealed file changed: %q, %v", b, err)
	}
	if !slices.Contains(e.Cohort.Confinement.ReadOnly, sealed) {
		t.Errorf("the confinement's read-only paths %v do not name the sealed file", e.Cohort.Confinement.ReadOnly)
	}
	for _, k := range []string{"path", "tool", "toolengine", "toolplant", "toolpath"} {
		if got[k] == "0" {
			t.Errorf("%s: the handed directory was reached", k)
		}
	}
	if _, err := os.Stat(filepath.Join(own, "auth.json")); err == nil {
		t.Error("a tool planted auth.json in its engine's handed directory")
	}
	if got["plain"] != "0" {
		t.Errorf("plain bash did not inherit the handed descriptor: the tool shell's refusal above proves nothing")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Logf("Yama's ptrace_scope is %s: no control of the engine's table", strings.TrimSpace(string(b)))
	} else if got["plainengine"] != "0" {
		t.Errorf("plain bash did not reach the engine's descriptor: the tool shell's refusal above proves nothing")
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-handed", Grace: time.Second})
}

// TestHandedDirUnconfined: an engine launched without its namespaces is
// handed its directories all the same, at the same descriptors.
func TestHandedDirUnconfined(t *testing.T) {
	sandboxtest.Require(t)
	m := NewManager(Config{NoConfinement: true})
	t.Cleanup(m.Close)
	own := t.TempDir()
	if err := os.Mkdir(filepath.Join(own, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "sub", "mark"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := launchWith(t, m, shProbe+`probe write 'echo mine > /proc/self/fd/3/new.json'
probe two 'test -e /proc/self/fd/4/mark'
echo ready 1
exec sleep 300
`, func(s *Spec) { s.Dirs = []string{own, filepath.Join(own, "sub")} })
	got := e.expect(t, "write", "two", "ready")
	if got["write"] != "0" || got["two"] != "0" {
		t.Errorf("the unconfined engine was not handed its directories: write %s, second %s", got["write"], got["two"])
	}
	if b, err := os.ReadFile(filepath.Join(own, "new.json")); err != nil || string(b) != "mine\n" {
		t.Errorf("the engine's write through its descriptor did not land: %q, %v", b, err)
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-handed-unconfined", Grace: time.Second})
}

// TestHandedDirMissing: a handed directory that is missing, or a symlink,
// and a sealed file that is missing, a symlink or in no handed directory,
// refuse the launch of a confined engine, naming it, and nothing runs.
func TestHandedDirMissing(t *testing.T) {
	m := testManager(t)
	d := t.TempDir()
	link := filepath.Join(d, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d, "gone"), filepath.Join(d, "sealedlink")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ dir, sealed string }{
		"missing":        {filepath.Join(d, "gone"), ""},
		"symlink":        {link, ""},
		"sealed missing": {d, filepath.Join(d, "gone.json")},
		"sealed link":    {d, filepath.Join(d, "sealedlink")},
		"sealed outside": {d, "/etc/hostname"},
	} {
		t.Run(name, func(t *testing.T) {
			conv, exe := ids(t)
			spec := Spec{Conversation: conv, Execution: exe, Argv: []string{"sh", "-c", "touch " + filepath.Join(d, "ran")},
				Stderr: os.Stderr, Dirs: []string{tc.dir}}
			named := tc.dir
			if tc.sealed != "" {
				spec.Sealed, named = []string{tc.sealed}, tc.sealed
			}
			_, err := m.Launch(ctxT(t), spec)
			if err == nil || !strings.Contains(err.Error(), named) {
				t.Fatalf("launch handing %s, sealing %q: %v; want a refusal naming %s", tc.dir, tc.sealed, err, named)
			}
			if _, err := os.Stat(filepath.Join(d, "ran")); err == nil {
				t.Fatal("the engine ran")
			}
		})
	}
}
