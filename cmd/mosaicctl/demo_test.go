package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestDemo runs the README's main job (contrib/demo/inner.sh, what
// `make demo` runs inside the sandbox) on the sandbox's systemd, so the
// first command of the README stays true: the real Pi answers through the
// stub model, the tool's setsid child is found in the engine scope and is
// gone after the force stop, the proof verifies offline and in the audit,
// and the recovered execution answers.
func TestDemo(t *testing.T) {
	sandboxtest.Require(t)
	if os.Getenv("MOSAIC_PI") == "" {
		sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		sandboxtest.Unavailable(t, "tmux is not installed (.ci/run installs it)")
	}
	bin := sandboxtest.Bin(t, "mosaicctl")
	script, err := filepath.Abs(filepath.Join("..", "..", "contrib", "demo", "inner.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "MOSAIC_BIN_DIR="+filepath.Dir(bin))
	r := runCmd(t, cmd)
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"The listing is above.",          // the streamed answer after the tool
		"/engine\n",                      // the setsid child's cgroup is the engine scope's
		"background jobs left: 0",        // the force stop killed it
		"verified: all 16 checks passed", // basis and confinement included
		"0 failed verification",          // the audit re-verified the journaled proof
		"launched: execution",
		"Back after the recovery",
		"| observer |", // the attached terminal's status line
	} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}
