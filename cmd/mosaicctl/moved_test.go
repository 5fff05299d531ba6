package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRecoverOfAMovedProject: `recover` of a conversation whose project
// directory was moved away after a proven stop is refused
// `launch-failed`, naming the project, before the claim is touched; the
// binding stays stopped, so once the project is back `recover` launches
// and a prompt is answered. On a build that tried the launch, the held
// child's exec failed on the missing working directory ("fork/exec
// /proc/self/exe: no such file or directory"), the claim was left
// uncertain with no process to prove gone, and neither stop nor a restart
// nor recover could ever bring the conversation back.
func TestRecoverOfAMovedProject(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "moved", stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"one"}}, {Text: []string{"two"}}}})
	bin, id := pc.bin, pc.id
	if r := run(t, bin, "prompt", "--take", id, "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, stderr %q", r.code, r.stderr)
	}
	away := pc.proj + "-away"
	if err := os.Rename(pc.proj, away); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(away, pc.proj) })
	r := run(t, bin, "recover", "--take", id)
	wantRefusal(t, r, protocol.CodeLaunchFailed)
	if !strings.Contains(r.stderr, pc.proj) {
		t.Errorf("recover of a moved project: %q; want it to name %s", r.stderr, pc.proj)
	}
	if st := readStatus(t, bin, id); st.Claim == nil || st.Claim.State != "stopped" || !st.Claim.Proven {
		t.Fatalf("claim after the refused recover: %+v; want it still stopped with a proof", st.Claim)
	}
	if err := os.Rename(away, pc.proj); err != nil {
		t.Fatal(err)
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 {
		t.Fatalf("recover with the project back: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "prompt", "--take", id, "again"); r.code != 0 || r.stdout != "two\n" {
		t.Fatalf("prompt after the recover: exit %d, stdout %q, stderr %q; want the answer", r.code, r.stdout, r.stderr)
	}
}
