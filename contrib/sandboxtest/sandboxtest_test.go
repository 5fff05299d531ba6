package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandbox checks the sandbox itself: a non-root test user under a real
// user manager, in a cgroup namespace whose root is the sandbox.
func TestSandbox(t *testing.T) {
	env := Require(t)
	if env.UID == 0 && os.Getenv("MOSAIC_SANDBOX") == "1" {
		t.Fatalf("sandbox runs tests as root; want the non-root test user")
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/user@"; !strings.Contains(string(cg), want) {
		t.Fatalf("test runs outside the user manager: /proc/self/cgroup = %q", cg)
	}
	if _, err := os.Stat(filepath.Join(env.RuntimeDir, "bus")); err != nil {
		t.Fatalf("no user bus: %v", err)
	}
}
