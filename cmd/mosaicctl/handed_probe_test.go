package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/conversations"
)

// agentDirProbeTool tries, from a bash tool of the confined real Pi, every
// way to the engine's agent directory other than the three
// TestToolCannotPlantPiCredentials tries; probe.txt gets one line each,
// "ok NAME" when the way reached or wrote the directory.
const agentDirProbeTool = `exec > probe.txt 2>&1
pi=$PPID; own=$(cat agentdir.txt)
try() { n=$1; shift; if ( eval "$*" ) >/dev/null 2>&1; then echo "ok $n"; else echo "no $n"; fi; }
try env-ls 'ls "$PI_CODING_AGENT_DIR/"'
try devfd 'ls /dev/fd/3/'
try threadself 'ls /proc/thread-self/fd/3/'
try pifd 'ls /proc/$pi/fd/3/'
try pifdinfo 'cat /proc/$pi/fdinfo/3'
for tid in $(ls /proc/$pi/task); do try task-$tid 'ls /proc/$pi/task/'$tid'/fd/3/'; done
try picwd 'ls /proc/$pi/cwd/'
try piroot 'ls /proc/$pi/root/'
try mapfiles 'ls /proc/$pi/map_files/'
try pienviron 'cat /proc/$pi/environ'
for p in $(ls /proc | grep -E "^[0-9]+$"); do [ "$p" = "$$" ] && continue; [ "$p" = "$BASHPID" ] && continue
  for f in /proc/$p/fd/*; do if [ "$(readlink "$f" 2>/dev/null)" = "$own" ]; then
    try "other-$p-$(basename $f)" 'echo x > '$f'/auth.json'; fi; done; done
try masked-ls 'ls "$own/"'
try masked-mkdir 'mkdir -p "$own" && echo "{}" > "$own/planted-in-mask.json"'
try unshare-umount 'unshare -Urm sh -c "umount -l $(dirname $(dirname $own)) || umount -l $(dirname $own)"; test -e "$own/settings.json"'
try unshare-ls 'unshare -Urm sh -c "ls $own/settings.json"'
try pidfd-getfd 'perl -e '"'"'my $pfd = syscall(434, '$pi', 0); die "open" if $pfd < 0; my $fd = syscall(438, $pfd, 3, 0); die "getfd $!" if $fd < 0; opendir(my $d, "/proc/self/fd/$fd") or die; print readdir($d)'"'"''
try ptrace-mem 'exec 5</proc/$pi/mem'
ls -la /proc/$pi/fd 2>&1 | head -5
readlink /proc/self/fd/3 || true
echo "env PI_CODING_AGENT_DIR=$PI_CODING_AGENT_DIR"
ls -l /proc/$$/fd
echo done`

// TestToolFindsNoWayToItsAgentDir: the other ways a bash tool might reach
// its engine's handed agent directory (helper 155's review), each
// refused: its own descriptors, Pi's descriptor table and other /proc
// entries, every process's descriptors, the masked path, its own user
// and mount namespace, pidfd_getfd.
func TestToolFindsNoWayToItsAgentDir(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "probe", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Probing."}, Tool: &stubmodel.ToolCall{Command: agentDirProbeTool}},
		{Text: []string{"Probed."}},
	}})
	state, err := conversations.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(state, "agent", pc.id)
	if err := os.WriteFile(filepath.Join(pc.proj, "agentdir.txt"), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "probe")
	if r.code != 0 {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(pc.proj, "probe.txt"))
	t.Logf("probe.txt:\n%s", b)
	for _, line := range strings.Split(string(b), "\n") {
		// Pi's cwd is the project, the tool's own; what masked-mkdir
		// wrote, if anything, is checked where it would matter below.
		if strings.HasPrefix(line, "ok ") && !strings.HasPrefix(line, "ok picwd") && !strings.HasPrefix(line, "ok masked-mkdir") {
			t.Errorf("a tool reached its engine's agent directory: %s", line)
		}
	}
	if _, err := os.Stat(filepath.Join(own, "planted-in-mask.json")); err == nil {
		t.Errorf("a write to the masked path landed in the real agent directory")
	}
}

// TestPiWriteToolThroughPlantedLink: the same plant as
// TestReviewPiWriteToolPlantsCredentials, but the path the model names is
// an innocent project file that a bash tool made a link to
// /proc/self/fd/3/auth.json: the link is resolved in Pi's process, so a
// filter on the write tool's path (a reviewed extension's tool_call
// check) would not keep it out. FAILS while the attack works.
func TestPiWriteToolThroughPlantedLink(t *testing.T) {
	sandboxtest.Require(t)
	args, _ := json.Marshal(map[string]string{"path": "notes.json", "content": plantedCredential})
	pc := realPiConversation(t, "wlink", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Script."}, Tool: &stubmodel.ToolCall{Command: writeAttackScript + "; ln -s /proc/self/fd/3/auth.json notes.json"}},
		{Text: []string{"Noting."}, Tool: &stubmodel.ToolCall{Name: "write", Args: args}},
		{Text: []string{"Noted."}},
	}})
	r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "note")
	t.Logf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	if b, err := os.ReadFile(filepath.Join(pc.proj, "attack.txt")); err == nil {
		t.Errorf("Pi ran a credential command written through a planted link: attack.txt %q", b)
	}
}
