package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestWorkdirSwappedForALink: the engine's working directory is the
// project, which its tools may rename and put a link in the place of
// (the project's parent is the user's). The next engine's held child is
// started in that directory by path before its confinement, so a link
// there to /dev or to the runtime directory would leave the next engine
// working in the host's devtmpfs or the user's runtime directory, under
// the mounts that cover them: every device, every server there, by
// relative path. The working directory is taken again after the mounts,
// so the engine works in what its own namespace shows at that path.
func TestWorkdirSwappedForALink(t *testing.T) {
	sandboxtest.Require(t)
	m := testManager(t)
	rts := runtimeDirs()
	if len(rts) == 0 {
		t.Fatal("no runtime directory in the sandbox")
	}
	rt := rts[0]
	server := "nvim." + strconv.Itoa(os.Getpid()) + ".cwd"
	serveUnix(t, filepath.Join(rt, server))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, target string }{{"dev", "/dev"}, {"runtime", rt}} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			proj := filepath.Join(base, "proj")
			if err := os.Mkdir(proj, 0o755); err != nil {
				t.Fatal(err)
			}
			dir := func(s *Spec) { s.Dir = proj }
			// The first engine's tool swaps its project for a link.
			e := launchWith(t, m, fmt.Sprintf(`mv %[1]s %[1]s.real && ln -s %[2]s %[1]s; echo "swapped $?"; exec cat`,
				shellQuote(proj), shellQuote(c.target)), dir)
			requireConfined(t, e)
			if got := e.expect(t, "swapped"); got["swapped"] != "0" {
				t.Fatalf("the tool could not swap its project for a link (%q)", got["swapped"])
			}
			e.Stop(ctxT(t), StopOptions{Stop: "stop-swap", Grace: time.Second})
			// The next engine, launched in the same project.
			e2 := launchWith(t, m, fmt.Sprintf(`exec 2>/dev/null; bin=%s
echo "cwd $(pwd -P)"
echo "here $(ls -A | sort | tr '\n' ' ')"
if [ -c ./fuse ] && (exec 3<>./fuse); then echo "fuse 0"; else echo "fuse 1"; fi
if env `+unixEnv+`=connect:./%s "$bin" </dev/null >/dev/null; then echo "server 0"; else echo "server 1"; fi
echo "ready 1"; exec cat`, shellQuote(bin), server), dir)
			requireConfined(t, e2)
			got := e2.expect(t, "cwd", "here", "fuse", "server", "ready")
			t.Logf("the next engine works in %q, which holds %q", got["cwd"], got["here"])
			if got["fuse"] == "0" {
				t.Errorf("a tool of the next engine opened the host's FUSE device through its working directory")
			}
			if got["server"] == "0" {
				t.Errorf("a tool of the next engine reached the user's server in the runtime directory through its working directory")
			}
			e2.Stop(ctxT(t), StopOptions{Stop: "stop-next", Grace: time.Second})
		})
	}
}

// TestWorkdirNearAMask: a directory that holds a hidden one (~/.config
// holds ~/.config/systemd) is bound onto itself to keep it in place
// (fixAncestors), and the mask is made on that bind: a working directory
// entered before the bind, at that directory or below it (a project at
// ~/.config, or at ~/.config/nvim), stays on the mount below it, where
// the hidden directory is not masked, and a tool reached it by a relative
// path (systemd/user/x.service, ../systemd/user/x.service: a unit the user
// manager runs outside the cohort).
func TestWorkdirNearAMask(t *testing.T) {
	sandboxtest.Require(t)
	m := testManager(t)
	top := filepath.Join(t.TempDir(), "config")
	hidden := filepath.Join(top, "systemd")
	for _, d := range []string{hidden, filepath.Join(top, "nvim")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(hidden, "secret"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir, rel string }{{"at", top, "systemd"}, {"below", filepath.Join(top, "nvim"), "../systemd"}} {
		t.Run(c.name, func(t *testing.T) {
			e := launchWith(t, m, fmt.Sprintf(`exec 2>/dev/null
echo "relative $(cat %[1]s/secret || echo none)"
echo "absolute $(cat %[2]s/secret || echo none)"
if echo x > %[1]s/planted; then echo "planted 0"; else echo "planted 1"; fi
echo "ready 1"; exec cat`, c.rel, shellQuote(hidden)), func(s *Spec) { s.Dir, s.Hide = c.dir, []string{hidden} })
			requireConfined(t, e)
			got := e.expect(t, "relative", "absolute", "planted", "ready")
			if got["absolute"] != "none" {
				t.Fatalf("the hidden directory is not masked at its path (%q): the test proves nothing", got["absolute"])
			}
			if got["relative"] != "none" {
				t.Errorf("a tool read the hidden directory through its working directory (%q)", got["relative"])
			}
			if _, err := os.Stat(filepath.Join(hidden, "planted")); err == nil || got["planted"] == "0" {
				t.Errorf("a tool wrote into the hidden directory through its working directory")
			}
		})
	}
}
