package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/proofs"
)

// TestProofVerifyVerdicts: a proof that is not one, or does not hold, ends
// `proof verify` with a stable code on one line of stderr, exit 4 (it was
// judged: done, not as asked), and a fix; a good one exits 0.
func TestProofVerifyVerdicts(t *testing.T) {
	bin := sandboxtest.Bin(t, "mosaicctl")
	wall := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	boot, err := proofs.NewBootProof(anID, "e-0123456789abcdef", "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", "11111111-2222-4333-8444-555555555555", wall)
	if err != nil {
		t.Fatal(err)
	}
	good, err := proofs.Encode(boot)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(good), `"execution":"e-0123456789abcdef"`, `"execution":"e-fedcba9876543210"`, 1)
	if tampered == string(good) {
		t.Fatal("the tamper did not apply")
	}
	file := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(file, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{"a good proof", []string{"-"}, string(good), 0, ""},
		{"garbage on standard input", []string{"-"}, "garbage\n", 4,
			"mosaicctl: proof-malformed: standard input is not a cohort or boot proof: decode proof: canonical json: "},
		{"a tampered proof in a file", []string{file}, "", 4,
			"mosaicctl: proof-unverified: " + file + " does not verify: 1 of 6 checks failed (digest; the FAIL lines on standard output say why), " +
				"so it proves no stop; re-check the copy the controller journaled with `mosaicctl audit " + anID + "`\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"proof", "verify"}, tc.args...)...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			r := runCmd(t, cmd)
			if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.stderr) || strings.Count(r.stderr, "\n") > 1 ||
				(tc.stderr == "" && r.stderr != "") {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant exit %d and one line of stderr starting %q", r.code, r.stdout, r.stderr, tc.code, tc.stderr)
			}
		})
	}
}
