package scopes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// managerProbes tries to plant a unit, a drop-in for mosaic's own
// service, a user-manager environment file, a session bus service and an
// autostart entry (%[1]s … %[5]s).
const managerProbes = `try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
plant() { mkdir -p "$(dirname "$1")" && printf '%%s\n' "$2" > "$1" && test -s "$1"; }
try unit-file plant %[1]s '[Service]'
try unit-drop-in plant %[2]s '[Service]'
try environment-d plant %[3]s 'LD_PRELOAD=/tmp/x.so'
try dbus-service plant %[4]s '[D-BUS Service]'
try autostart plant %[5]s '[Desktop Entry]'
`

// TestUserManagerConfigHidden: a tool of a confined engine cannot write
// what the user's session runs outside every cohort later (a unit in
// ~/.config/systemd/user or ~/.local/share/systemd/user, a drop-in for
// mosaic-conv@.service, an environment.d file, a session bus service, an
// autostart entry); outside the engine the same writes get through.
func TestUserManagerConfigHidden(t *testing.T) {
	m := testManager(t)
	cfg, err := xdg.ConfigHome()
	if err != nil {
		t.Fatal(err)
	}
	data, err := xdg.DataHome()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprint(os.Getpid())
	targets := []string{
		filepath.Join(cfg, "systemd", "user", "mosaic-test-"+tag+".service"),
		filepath.Join(data, "systemd", "user", "mosaic-conv@.service.d", "mosaic-test-"+tag+".conf"),
		filepath.Join(cfg, "environment.d", "mosaic-test-"+tag+".conf"),
		filepath.Join(data, "dbus-1", "services", "org.mosaic.Test"+tag+".service"),
		filepath.Join(cfg, "autostart", "mosaic-test-"+tag+".desktop"),
	}
	remove := func() {
		for _, p := range targets {
			os.Remove(p)
		}
	}
	t.Cleanup(remove)
	probes := fmt.Sprintf(managerProbes, shellQuote(targets[0]), shellQuote(targets[1]), shellQuote(targets[2]),
		shellQuote(targets[3]), shellQuote(targets[4]))
	out, err := exec.Command("sh", "-c", probes).Output()
	if err != nil {
		t.Fatalf("the probes outside the engine: %v", err)
	}
	remove()
	for n, v := range escapeLines(string(out)) {
		if v != "0" {
			t.Fatalf("outside the engine %s did not get through (%q): the attempt inside proves nothing", n, v)
		}
	}
	e := launchEngine(t, m, `echo "engine $$"
`+probes+`echo "ready 1"; exec cat`)
	names := []string{"unit-file", "unit-drop-in", "environment-d", "dbus-service", "autostart"}
	prefixes := []string{"engine", "ready"}
	for _, n := range names {
		prefixes = append(prefixes, "escape "+n)
	}
	got := e.expect(t, prefixes...)
	for _, n := range names {
		if got["escape "+n] != "1" {
			t.Errorf("a tool wrote the user manager's %s (%q)", n, got["escape "+n])
		}
	}
	for _, p := range targets {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written from inside the engine", p)
		}
	}
}
