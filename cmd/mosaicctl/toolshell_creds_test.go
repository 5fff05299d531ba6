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

// writeAttackScript is a bash tool that writes attack.sh into the
// project: run by Pi as a planted credential command (Pi's working
// directory is the project), it records in attack.txt whether it could
// attach to its parent, Pi, as attachEngineTool tries to, and prints a
// key so that the request still goes out.
const writeAttackScript = `cat > "$PWD/attack.sh" <<'EOS'
{ echo "parent $(cat /proc/$PPID/comm)"
if exec 3</proc/$PPID/mem; then echo mem-opened; else echo mem-refused; fi
if readlink /proc/$PPID/fd/1; then echo stdout-read; else echo stdout-refused; fi
} > "$PWD/attack.txt" 2>&1
echo stub-dummy-key
EOS
echo written`

// plantedCredential is the auth.json that makes Pi run attack.sh itself,
// outside the tool shell: Pi re-reads the file when it changes and
// resolves an api_key credential "!CMD" by running CMD with /bin/sh
// (resolve-config-value.js), a child of the engine in the engine's own
// Landlock domain.
const plantedCredential = `{"` + stubmodel.DefaultProvider + `":{"type":"api_key","key":"!. ./attack.sh"}}`

// plantCredentialTool is a bash tool that writes attack.sh and tries to
// plant plantedCredential every way to the engine's agent directory: the
// one its environment names, its path (which the test leaves in
// agentdir.txt: a tool would guess it from XDG_STATE_HOME), and the
// engine's own descriptor of it. plant.txt says which ways wrote.
const plantCredentialTool = writeAttackScript + `
cred='` + plantedCredential + `'
for d in "$PI_CODING_AGENT_DIR" "$(cat agentdir.txt)" /proc/$PPID/fd/3; do
  if printf '%s\n' "$cred" > "$d/auth.json"; then echo "planted $d"; else echo "refused $d"; fi
  echo x > "$d/probe.txt" 2>/dev/null && echo "reached $d"
done > plant.txt 2>&1; echo tried`

// TestToolCannotPlantPiCredentials: a bash tool of the real, confined Pi
// cannot write its engine's agent directory, where an api_key credential
// "!CMD" would make Pi run CMD in its own domain: Pi reaches the
// directory only through a descriptor it was handed, which the tool shell
// does not pass on, and its path is masked. Pi still answers with the
// credentials it was given. Before the directory was handed (it was bound
// back at its path, writable), the tool planted one and CMD opened Pi's
// memory (mutant 426).
func TestToolCannotPlantPiCredentials(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "creds", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Planting."}, Tool: &stubmodel.ToolCall{Command: plantCredentialTool}},
		{Text: []string{"Planted."}},
	}})
	state, err := conversations.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(state, "agent", pc.id)
	if err := os.WriteFile(filepath.Join(pc.proj, "agentdir.txt"), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "plant")
	if r.code != 0 || !strings.Contains(r.stdout, "Planted.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(own, "settings.json")); err != nil {
		t.Fatalf("the engine's agent directory is not at %s (%v): the tool tried the wrong path", own, err)
	}
	plant, _ := os.ReadFile(filepath.Join(pc.proj, "plant.txt"))
	t.Logf("plant.txt: %q", plant)
	// auth.json is sealed besides: probe.txt, which is not, shows the
	// directory itself was out of reach each way.
	if n := strings.Count(string(plant), "refused "); n != 3 || strings.Contains(string(plant), "reached ") {
		t.Errorf("a tool wrote its engine's agent directory (%d of 3 ways refused): %q", n, plant)
	}
	if _, err := os.Stat(filepath.Join(own, "probe.txt")); err == nil {
		t.Error("a tool wrote probe.txt in its engine's agent directory")
	}
	if b, err := os.ReadFile(filepath.Join(own, "auth.json")); err == nil && strings.Contains(string(b), "!") {
		t.Errorf("the engine's auth.json holds a planted command: %q", b)
	}
	// Pi resolves a credential before the request it is for, and the
	// prompt ended after the turn's last request.
	if b, err := os.ReadFile(filepath.Join(pc.proj, "attack.txt")); err == nil {
		t.Errorf("Pi ran a planted credential command: attack.txt %q", b)
	}
}

// TestPiWriteToolCannotPlantCredentials: Pi's own write tool runs in
// Pi's process, which reaches its agent directory through the descriptor
// it was handed (/proc/self/fd/3), so the model can name auth.json there
// where no bash tool can. The copy, holding no OAuth login, is sealed
// read-only in the engine's view: the write fails, Pi goes on with the
// credentials it was given and runs no command. Unsealed (mutant 428),
// the model planted an api_key "!CMD" and Pi ran CMD in its own domain,
// which opened Pi's memory (helper 155's review).
func TestPiWriteToolCannotPlantCredentials(t *testing.T) {
	sandboxtest.Require(t)
	args, err := json.Marshal(map[string]string{"path": "/proc/self/fd/3/auth.json", "content": plantedCredential})
	if err != nil {
		t.Fatal(err)
	}
	pc := realPiConversation(t, "wtool", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Script."}, Tool: &stubmodel.ToolCall{Command: writeAttackScript}},
		{Text: []string{"Planting."}, Tool: &stubmodel.ToolCall{Name: "write", Args: args}},
		{Text: []string{"Planted."}},
	}})
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "plant"); r.code != 0 || !strings.Contains(r.stdout, "Planted.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	state, err := conversations.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(state, "agent", pc.id, "auth.json")); err != nil || strings.Contains(string(b), "!") {
		t.Errorf("the engine's auth.json: %q, %v; want the sealed copy as the controller wrote it", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(pc.proj, "attack.txt")); err == nil {
		t.Errorf("Pi ran a credential command its write tool planted: attack.txt %q", b)
	}
	if _, err := os.Stat(filepath.Join(pc.proj, "attack.sh")); err != nil {
		t.Fatalf("the first tool call did not run (%v): the plant proves nothing", err)
	}
}

// TestPiUsesItsSealedKey: sealing auth.json keeps Pi using what is in
// it: with the provider's key only in the user's auth.json (none in
// models.json), the real Pi reads it from its sealed copy and the stub
// model gets an authorized request. Pi swallows a failed read of the
// file, so a seal that broke reading would show only as no key.
func TestPiUsesItsSealedKey(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "sealedkey", stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Keyed."}}}})
	models := filepath.Join(pc.agent, "models.json")
	b, err := os.ReadFile(models)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m["providers"][stubmodel.DefaultProvider], "apiKey")
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(models, b, 0o600); err != nil {
		t.Fatal(err)
	}
	auth := `{"` + stubmodel.DefaultProvider + `":{"type":"api_key","key":"sk-sealed"}}`
	if err := os.WriteFile(filepath.Join(pc.agent, "auth.json"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	// The controller starts, and launches the engine, at this first
	// connection: after the edit.
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "key"); r.code != 0 || !strings.Contains(r.stdout, "Keyed.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := pc.stub.Requests()
	if len(reqs) == 0 || !reqs[len(reqs)-1].AuthPresent {
		t.Fatalf("the stub's requests %+v: want the last authorized", reqs)
	}
}
