package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRemovalRefusalsHaveCodes: `uninstall` while a conversation socket
// is active and `conv rm` of a conversation whose socket is active are
// refusals like every other, `socket-active` (exit 2) with the stop that
// works as typed, not an exit-1 error a script cannot tell from a broken
// bus; a relative --unit-dir is a bad command line (`usage`). Each
// refusal leaves the units and the conversation in place.
func TestRemovalRefusalsHaveCodes(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	t.Setenv("PATH", "/usr/bin:/bin") // no pi: no engine, only the socket
	id, _, _ := startConversation(t, bin, "removal")
	sock, svc := "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service"
	for _, tc := range []struct {
		name string
		args []string
		code string
		fix  string
	}{
		{"uninstall", []string{"uninstall"}, protocol.CodeSocketActive, "`systemctl --user stop " + sock + "`"},
		{"conv rm", []string{"conv", "rm", id}, protocol.CodeSocketActive, "`systemctl --user stop " + sock + " " + svc + "`"},
		{"install --unit-dir relative", []string{"install", "--unit-dir", "units"}, protocol.CodeUsage, "/units"},
		{"uninstall --unit-dir relative", []string{"uninstall", "--unit-dir", "units"}, protocol.CodeUsage, "/units"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, bin, tc.args...)
			wantRefusal(t, r, tc.code)
			if !strings.Contains(r.stderr, tc.fix) {
				t.Fatalf("stderr %q; want it to name the fix %s", r.stderr, tc.fix)
			}
		})
	}
	if r := run(t, bin, "conv", "show", id); r.code != 0 {
		t.Fatalf("conv show after the refusals: exit %d, stderr %q; want the conversation kept", r.code, r.stderr)
	}
	if out := mustRun(t, "systemctl", "--user", "is-active", sock); strings.TrimSpace(out) != "active" {
		t.Fatalf("%s is %q after the refusals; want it left active", sock, out)
	}
	mustRun(t, "systemctl", "--user", "stop", sock, svc)
	mustRun(t, bin, "conv", "rm", id)
}
