package scopes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// runtimeProbes waits for a line on stdin, then tries, in the runtime
// directory %[2]s, an editor server listening since before the launch
// (%[3]s) and one started after it (%[4]s), the key agents (the
// ssh-agent socket %[5]s, a socket in gpg's directory %[6]s) and a file
// of its own. %[1]s is the test binary.
const runtimeProbes = `bin=%[1]s
try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
dial() { env ` + unixEnv + `=connect:"$1" "$bin"; }
echo "engine $$"; read go
try editor-before dial %[3]s
try editor-after dial %[4]s
try ssh-agent dial %[5]s
try gpg-agent dial %[6]s
try own-file sh -c 'echo x > %[2]s/mosaic-test-own && test -s %[2]s/mosaic-test-own'
echo "ready 1"; exec cat`

// TestRuntimeDirPrivate: the engine gets a private, writable runtime
// directory: the user's editor servers and key agents there are out of a
// tool's reach, whether listening before the launch or started after it,
// while a tool can write its own files there, which the user's runtime
// directory never shows. The same connections outside the engine get
// through.
func TestRuntimeDirPrivate(t *testing.T) {
	m := testManager(t)
	rts := runtimeDirs()
	if len(rts) == 0 {
		t.Fatal("no runtime directory in the sandbox")
	}
	rt := rts[0]
	tag := strconv.Itoa(os.Getpid())
	gpgDir := filepath.Join(rt, "gnupg")
	if err := os.Mkdir(gpgDir, 0o700); err == nil {
		t.Cleanup(func() { os.RemoveAll(gpgDir) })
	} else if !os.IsExist(err) {
		t.Fatal(err)
	}
	before := filepath.Join(rt, "nvim."+tag+".0")
	later := filepath.Join(rt, "nvim."+tag+".1")
	ssh := filepath.Join(rt, "ssh-agent-"+tag)
	gpg := filepath.Join(gpgDir, "S.gpg-agent-"+tag)
	for _, p := range []string{before, ssh, gpg} {
		serveUnix(t, p)
	}
	t.Setenv("SSH_AUTH_SOCK", ssh)
	t.Cleanup(func() { os.Remove(filepath.Join(rt, "mosaic-test-own")) })
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probes := fmt.Sprintf(runtimeProbes, shellQuote(bin), shellQuote(rt), shellQuote(before), shellQuote(later),
		shellQuote(ssh), shellQuote(gpg))
	e := launchEngine(t, m, probes)
	e.expect(t, "engine")
	serveUnix(t, later)
	// Outside the engine every one of them gets through.
	outside, err := exec.Command("sh", "-c", "echo go | { "+probes+"; }").Output()
	if err != nil {
		t.Fatalf("the probes outside the engine: %v", err)
	}
	os.Remove(filepath.Join(rt, "mosaic-test-own"))
	for n, v := range escapeLines(string(outside)) {
		if v != "0" {
			t.Fatalf("outside the engine %s did not get through (%q): the attempt inside proves nothing", n, v)
		}
	}
	if _, err := e.Stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	got := e.expect(t, "escape editor-before", "escape editor-after", "escape ssh-agent", "escape gpg-agent", "escape own-file", "ready")
	for _, n := range []string{"editor-before", "editor-after", "ssh-agent", "gpg-agent"} {
		if got["escape "+n] != "1" {
			t.Errorf("a tool reached the user's %s in the runtime directory (%q)", n, got["escape "+n])
		}
	}
	if got["escape own-file"] != "0" {
		t.Errorf("a tool could not write its own file in its runtime directory (%q)", got["escape own-file"])
	}
	if _, err := os.Stat(filepath.Join(rt, "mosaic-test-own")); err == nil {
		t.Errorf("the tool's file was written into the user's runtime directory")
	}
}
