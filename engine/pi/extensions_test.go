package pi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestExtensionPin: an extension is pinned by real path and SHA-256 and
// re-checked before each spawn; a directory, an npm: or git: spec, a
// missing file, a swap for a symlink and changed bytes are all refused,
// and the spec passes exactly -e PATH under --no-extensions.
func TestExtensionPin(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gate.ts")
	if err := os.WriteFile(file, []byte("export default function () {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.ts")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	e, err := PinExtension(link)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(file)
	if e.Path != real || len(e.SHA256) != 64 {
		t.Fatalf("pin %+v, want the real path %s", e, real)
	}
	if err := CheckExtension(e); err != nil {
		t.Fatalf("unchanged file: %v", err)
	}
	for _, bad := range []string{dir, "npm:evil", "git:github.com/x/y", filepath.Join(dir, "missing.ts")} {
		if _, err := PinExtension(bad); protocol.CodeOf(err) != protocol.CodeConfiguration {
			t.Errorf("pin %q: %v, want configuration", bad, err)
		}
	}

	if err := os.WriteFile(file, []byte("export default function (pi) { /* widened */ }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckExtension(e); protocol.CodeOf(err) != protocol.CodePinMismatch || !strings.Contains(err.Error(), "changed since it was pinned") {
		t.Fatalf("changed file: %v, want engine-pin-mismatch", err)
	}
	os.Remove(file)
	other := filepath.Join(dir, "other.ts")
	os.WriteFile(other, []byte("export default function () {}\n"), 0o644)
	if err := os.Symlink(other, file); err != nil {
		t.Fatal(err)
	}
	if err := CheckExtension(Extension{Path: real, SHA256: e.SHA256}); protocol.CodeOf(err) != protocol.CodePinMismatch {
		t.Fatalf("a symlink swapped in: %v, want engine-pin-mismatch", err)
	}

	args, err := Seal{Session: "/abs/s.jsonl", Extensions: []string{"/abs/a.ts", "/abs/b.ts"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(args, " "); !strings.HasSuffix(got, "--session /abs/s.jsonl -e /abs/a.ts -e /abs/b.ts") || !strings.Contains(got, "--no-extensions") {
		t.Fatalf("args %s", got)
	}
}
