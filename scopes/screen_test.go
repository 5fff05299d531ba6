package scopes

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// screenLater waits for a line on stdin, then looks for the user's screen
// socket the test made after the launch (%[1]s the screen root) and makes
// a screen directory of its own there.
const screenLater = `echo "engine $$"; read go
if test -S %[1]s/S-user/1.pts-0.host; then echo "escape screen-later 0"; else echo "escape screen-later 1"; fi
if mkdir %[1]s/S-own && test -d %[1]s/S-own; then echo "escape screen-own 0"; else echo "escape screen-own 1"; fi
echo "screen-mode $(stat -c %%a %[1]s)"
echo "ready 1"; exec cat`

// TestScreenServerStartedLaterUnreachable: a screen server the user starts
// after the engine's launch makes its socket directory where the engine's
// tools cannot see it (screen's root is covered whole by a private
// tmpfs), while a tool's own screen can still make its directory there,
// in a root of the mode screen demands, which the user's root never
// shows.
func TestScreenServerStartedLaterUnreachable(t *testing.T) {
	m := testManager(t)
	root := t.TempDir()
	// screen's root is 0777 with the sticky bit (Debian's tmpfiles), and
	// screen refuses any other mode of it unless setuid.
	if err := os.Chmod(root, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	was := screenRoots
	screenRoots = []string{root}
	t.Cleanup(func() { screenRoots = was })
	t.Setenv("SCREENDIR", "")
	e := launchEngine(t, m, fmt.Sprintf(screenLater, shellQuote(root)))
	e.expect(t, "engine")
	dir := filepath.Join(root, "S-user")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	server, err := net.Listen("unix", filepath.Join(dir, "1.pts-0.host"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	if _, err := e.Stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	got := e.expect(t, "escape screen-later", "escape screen-own", "screen-mode", "ready")
	if got["screen-mode"] != "1777" {
		t.Errorf("screen's root inside has mode %s, not the 1777 of the user's (screen refuses it)", got["screen-mode"])
	}
	if got["escape screen-later"] != "1" {
		t.Errorf("a tool reached a screen server started after the launch (%q)", got["escape screen-later"])
	}
	if got["escape screen-own"] != "0" {
		t.Errorf("a tool could not make a screen directory of its own (%q)", got["escape screen-own"])
	}
	if _, err := os.Stat(filepath.Join(root, "S-own")); err == nil {
		t.Errorf("the tool's screen directory was made in the user's screen root")
	}
}
