package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/scopes"
)

// attachEngineTool is the attack of docs/security.md "Without Yama" as
// the real Pi's bash tool runs it: its shell's parent is the engine, and
// it opens the engine's memory (PTRACE_MODE_ATTACH, as pidfd_getfd of
// the engine's stdout needs) and reads where the engine's stdout leads
// (PTRACE_MODE_READ; the socket the controller takes the engine's words
// from). Each attempt says how it went in attach.txt.
const attachEngineTool = `{ echo "parent $(cat /proc/$PPID/comm)"
if exec 3</proc/$PPID/mem; then echo mem-opened; else echo mem-refused; fi
if readlink /proc/$PPID/fd/1; then echo stdout-read; else echo stdout-refused; fi
} > attach.txt 2>&1; echo tried`

// TestToolCannotAttachToRealPi: a bash tool of the real, confined Pi runs
// in the tool shell's nested Landlock domain, so it can neither open its
// engine's memory nor take its engine's stdout, Yama or not; the stop's
// proof names the tool shell. Without the domain (mutant 422) the same
// tool opens both on this kernel, which has no Yama.
func TestToolCannotAttachToRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "attach", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Attaching."}, Tool: &stubmodel.ToolCall{Command: attachEngineTool}},
		{Text: []string{"Tried."}},
	}})
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "attach"); r.code != 0 || !strings.Contains(r.stdout, "Tried.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	log := awaitAttachLog(t, pc.proj)
	if !strings.Contains(log, "parent pi") {
		t.Fatalf("the tool's parent is not the engine (pi): attach.txt %q", log)
	}
	for _, want := range []string{"mem-refused", "stdout-refused"} {
		if !strings.Contains(log, want) {
			t.Errorf("the tool attached to its engine: attach.txt %q, want %q", log, want)
		}
	}
	proof := filepath.Join(t.TempDir(), "proof.json")
	if r := run(t, pc.bin, "stop", "--take", "--yes", "--proof", proof, pc.id); r.code != 0 {
		t.Fatalf("stop --proof: exit %d, stderr %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(proof)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tool_shell":"`+scopes.ToolShell+`"`) && !strings.Contains(string(b), `"tool_shell": "`+scopes.ToolShell+`"`) {
		t.Errorf("the proof does not name the tool shell %s:\n%s", scopes.ToolShell, b)
	}
}

// TestClaudeToolCannotAttach: a Bash command of the real, confined
// Claude Code runs in the tool shell (CLAUDE_CODE_SHELL), so it can
// neither open its engine's memory nor read its engine's stdout.
func TestClaudeToolCannotAttach(t *testing.T) {
	sandboxtest.Require(t)
	if !slices.Contains(claude.Forced, "CLAUDE_CODE_SHELL="+scopes.ToolShell) {
		t.Fatalf("claude.Forced %q does not name the tool shell %s", claude.Forced, scopes.ToolShell)
	}
	r := newClaudeRig(t, "cattach")
	// The fake's marker ends at the first '}': no braces in the command.
	cmd := `(echo "parent $(cat /proc/$PPID/comm)"; if exec 3</proc/$PPID/mem; then echo mem-opened; else echo mem-refused; fi; ` +
		`if readlink /proc/$PPID/fd/1; then echo stdout-read; else echo stdout-refused; fi) > attach.txt 2>&1`
	r.approvedTurn(t, "please BASH"+"{"+cmd+"}")
	b, err := os.ReadFile(filepath.Join(r.proj, "attach.txt"))
	if err != nil {
		t.Fatalf("the Bash command did not run: %v", err)
	}
	t.Logf("attach.txt: %q", b)
	for _, want := range []string{"parent claude", "mem-refused", "stdout-refused"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("attach.txt %q, want %q in it", b, want)
		}
	}
}

// awaitAttachLog waits up to 10 s for attachEngineTool's attach.txt in
// proj to say what became of the engine's stdout, and returns it.
func awaitAttachLog(t *testing.T, proj string) string {
	t.Helper()
	var log string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(proj, "attach.txt"))
		if log = string(b); strings.Contains(log, "stdout-") || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("attach.txt: %q", log)
	return log
}
