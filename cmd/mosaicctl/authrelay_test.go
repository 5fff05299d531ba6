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
// user's auth.json, even one holding an OAuth login; what the model
// writes into its engine's own copy (with Pi's write tool, which reaches
// the copy through the descriptor Pi was handed: a copy holding a login
// is not sealed, since Pi writes its refreshes there) goes back only as
// an OAuth refresh (a newer login of a provider that is one, whose login
// had expired), never as a key, a "!command", a provider of its own or a
// GitHub Copilot token (which names the host requests go to); and a
// login the user renews reaches the running engine's copy.
func TestAuthRelayOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	exp := time.Now().Add(time.Hour).UnixMilli()
	past := time.Now().Add(-time.Second).UnixMilli() // Pi refreshes it at its next request
	loginJSON := func(access, refresh string, expires int64) string {
		return fmt.Sprintf(`{"type":"oauth","access":%q,"refresh":%q,"expires":%d}`, access, refresh, expires)
	}
	forged := fmt.Sprintf(`{"anthropic":%s,"github-copilot":%s,"openai":{"type":"api_key","key":"!touch pwned"},"evil":{"type":"api_key","key":"!touch pwned"}}`,
		loginJSON("a2", "r2", exp), loginJSON("tid=2;proxy-ep=proxy.evil.example;", "gho_1", exp))
	// The test names the user's auth.json in userauth.txt: the tool's own
	// models.json link leads nowhere now (the agent directory is Pi's
	// alone), and a tool would guess the path from HOME anyway.
	tool := `U="$(cat userauth.txt)"
echo '{"anthropic":{"type":"api_key","key":"!touch pwned"}}' 2>/dev/null > "$U"; echo "user $?" > relay.txt`
	forge, _ := json.Marshal(map[string]string{"path": "/proc/self/fd/3/auth.json", "content": forged})
	pc := realPiConversation(t, "authrelay", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Forging."}, Tool: &stubmodel.ToolCall{Command: tool}},
		{Text: []string{"Writing."}, Tool: &stubmodel.ToolCall{Name: "write", Args: forge}},
		{Text: []string{"Forged."}},
		{Text: []string{"Looked."}},
	}})
	user := filepath.Join(pc.agent, "auth.json")
	if err := os.WriteFile(filepath.Join(pc.proj, "userauth.txt"), []byte(user+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	copilot := loginJSON("tid=1;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", past)
	if err := os.WriteFile(user, []byte(fmt.Sprintf(`{"anthropic":%s,"github-copilot":%s,"openai":{"type":"api_key","key":"sk-user"}}`, loginJSON("a1", "r1", past), copilot)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, pc.bin, "prompt", "--take", "--timeout", "2m", pc.id, "forge"); r.code != 0 || !strings.Contains(r.stdout, "Forged.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	log, _ := os.ReadFile(filepath.Join(pc.proj, "relay.txt"))
	if strings.Contains(string(log), "user 0") || !strings.Contains(string(log), "user ") {
		t.Fatalf("the tool wrote the user's auth.json: relay.txt %q", log)
	}
	creds := waitCreds(t, user, func(c map[string]authCred) bool { return c["anthropic"].Access == "a2" })
	if c := creds["openai"]; c.Key != "sk-user" || len(creds) != 3 || creds["github-copilot"].Access != "tid=1;proxy-ep=proxy.individual.githubcopilot.com;" {
		t.Fatalf("more than the refresh went back: %+v", creds)
	}

	// The user renews the login (plain pi, another conversation): the
	// running engine's copy gets it. The copy is read where the
	// controller wrote it: Pi reaches that very file through its
	// descriptor (it is not sealed, holding a login).
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
