package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestFencedVerbNamesTheCommand: after a proven stop, a verb that takes
// control (`prompt --take`, `interrupt --take`, `queue resume --take`) is
// refused fenced, and the refusal names the mosaicctl command that gets
// past the fence, not only the controller's protocol word
// (acquire-recovery-control), which no such verb takes; the command,
// typed as given, works.
func TestFencedVerbNamesTheCommand(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "fenced", stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"one"}}, {Text: []string{"two"}}}})
	bin, id := pc.bin, pc.id
	if r := run(t, bin, "prompt", "--take", id, "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, stderr %q", r.code, r.stderr)
	}
	fix := "`mosaicctl recover --take " + id + "`"
	for _, args := range [][]string{
		{"prompt", "--take", id, "hi again"},
		{"interrupt", "--take", id},
		{"queue", "resume", "--take", id},
	} {
		r := run(t, bin, args...)
		wantRefusal(t, r, protocol.CodeFenced)
		if !strings.Contains(r.stderr, fix) {
			t.Errorf("%v after a proven stop: %q; want it to name %s", args, r.stderr, fix)
		}
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 {
		t.Fatalf("the named fix, %s: exit %d, stdout %q, stderr %q", fix, r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "prompt", "--take", id, "hi again"); r.code != 0 || r.stdout != "two\n" {
		t.Fatalf("prompt after the fix: exit %d, stdout %q, stderr %q; want the answer", r.code, r.stdout, r.stderr)
	}
}
