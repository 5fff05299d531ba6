package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// TestAuthRelayOnRealPi: a bash tool of the real Pi cannot write the
// user's auth.json, even one holding an OAuth login; what it writes into
// its engine's own copy goes back only as an OAuth refresh (a newer
// login of a provider that is one, whose login had expired), never as a
// key, a "!command", a provider of its own or a GitHub Copilot token
// (which names the host requests go to); and a login the user renews
// reaches the running engine's copy.
func TestAuthRelayOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	exp := time.Now().Add(time.Hour).UnixMilli()
	past := time.Now().Add(-time.Second).UnixMilli() // Pi refreshes it at its next request
	loginJSON := func(access, refresh string, expires int64) string {
		return fmt.Sprintf(`{"type":"oauth","access":%q,"refresh":%q,"expires":%d}`, access, refresh, expires)
	}
	forged := fmt.Sprintf(`{"anthropic":%s,"github-copilot":%s,"openai":{"type":"api_key","key":"!touch pwned"},"evil":{"type":"api_key","key":"!touch pwned"}}`,
		loginJSON("a2", "r2", exp), loginJSON("tid=2;proxy-ep=proxy.evil.example;", "gho_1", exp))
	// The tool learns the user's auth.json from its own models.json link.
	tool := `U="$(dirname "$(readlink "$PI_CODING_AGENT_DIR/models.json")")/auth.json"
echo '{"anthropic":{"type":"api_key","key":"!touch pwned"}}' 2>/dev/null > "$U"; echo "user $?" > relay.txt
printf '%s' '` + forged + `' > "$PI_CODING_AGENT_DIR/auth.json"; echo "own $?" >> relay.txt`
	pc := realPiConversation(t, "authrelay", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Forging."}, Tool: &stubmodel.ToolCall{Command: tool}},
		{Text: []string{"Forged."}},
		{Text: []string{"Looking."}, Tool: &stubmodel.ToolCall{Command: `cat "$PI_CODING_AGENT_DIR/auth.json" > seen.json`}},
		{Text: []string{"Looked."}},
	}})
	user := filepath.Join(pc.agent, "auth.json")
	copilot := loginJSON("tid=1;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", past)
	if err := os.WriteFile(user, []byte(fmt.Sprintf(`{"anthropic":%s,"github-copilot":%s,"openai":{"type":"api_key","key":"sk-user"}}`, loginJSON("a1", "r1", past), copilot)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "forge"); r.code != 0 || !strings.Contains(r.stdout, "Forged.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	log, _ := os.ReadFile(filepath.Join(pc.proj, "relay.txt"))
	if !strings.Contains(string(log), "own 0") || strings.Contains(string(log), "user 0") || !strings.Contains(string(log), "user ") {
		t.Fatalf("the tool wrote the user's auth.json, or not its copy: relay.txt %q", log)
	}
	creds := waitCreds(t, user, func(c map[string]authCred) bool { return c["anthropic"].Access == "a2" })
	if c := creds["openai"]; c.Key != "sk-user" || len(creds) != 3 || creds["github-copilot"].Access != "tid=1;proxy-ep=proxy.individual.githubcopilot.com;" {
		t.Fatalf("more than the refresh went back: %+v", creds)
	}
	if _, err := os.Stat(filepath.Join(pc.proj, "pwned")); err == nil {
		t.Fatal("a forged command ran")
	}

	// The user renews the login (plain pi, another conversation): the
	// running engine's copy gets it.
	if err := os.WriteFile(user, []byte(fmt.Sprintf(`{"anthropic":%s,"github-copilot":%s,"openai":{"type":"api_key","key":"sk-user"}}`, loginJSON("a3", "r3", exp+time.Hour.Milliseconds()), copilot)), 0o600); err != nil {
		t.Fatal(err)
	}
	state, err := xdg.StateHome()
	if err != nil {
		t.Fatal(err)
	}
	waitCreds(t, filepath.Join(state, "mosaic", "agent", pc.id, "auth.json"), func(c map[string]authCred) bool { return c["anthropic"].Access == "a3" })
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "look"); r.code != 0 || !strings.Contains(r.stdout, "Looked.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	seen := waitCreds(t, filepath.Join(pc.proj, "seen.json"), func(map[string]authCred) bool { return true })
	if seen["anthropic"].Access != "a3" {
		t.Fatalf("the engine sees %+v, not the user's renewed login", seen)
	}
}

type authCred struct{ Type, Access, Key string }

// waitCreds reads the auth.json at path until ok holds of it.
func waitCreds(t *testing.T, path string, ok func(map[string]authCred) bool) map[string]authCred {
	t.Helper()
	var last string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		last = string(b)
		var m map[string]authCred
		if json.Unmarshal(b, &m) == nil && ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q", path, last)
		}
	}
}
