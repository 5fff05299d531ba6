package claude

import (
	"os"
	"testing"

	"github.com/mosaic-agents/mosaic/scopes"
)

// TestMain lets the test binary serve as the scope launcher's held child.
func TestMain(m *testing.M) {
	scopes.MaybeRunHeld()
	os.Exit(m.Run())
}
