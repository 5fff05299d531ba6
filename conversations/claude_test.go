package conversations

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

const testUUID = "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e"

// claudeFixture is a valid Claude conversation in a fresh project, with
// XDG_STATE_HOME in the test's own directory and an env file of mode 0600.
func claudeFixture(t *testing.T) *Conversation {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	project := filepath.Join(root, "proj")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(root, "claude.env")
	if err := os.WriteFile(env, []byte("ANTHROPIC_API_KEY=sk-test\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Conversation{
		ID: ID(project, "alice", testUUID), Project: project, Seat: "alice", Workspace: DefaultWorkspace,
		EngineKind: engine.KindClaude,
		Claude: &Claude{Path: "/opt/claude/bin/claude", Version: "2.1.328", SHA256: strings.Repeat("ab", 32),
			Session: testUUID, EnvFile: env, Model: "claude-sonnet-4-5"},
	}
}

// TestClaudeConversationRules: a Claude conversation has its engine in
// [claude], no Pi session file and no Pi settings; its id follows its
// session UUID; the env file is checked at add time (a 0644 file, or a
// name outside the allow-list, refuses env-file); an adopted session's
// transcript must exist in the conversation's own config directory.
func TestClaudeConversationRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, c *Conversation)
		code   string // "" for valid
		want   string
	}{
		{"valid", func(*testing.T, *Conversation) {}, "", ""},
		{"pi session file given", func(_ *testing.T, c *Conversation) {
			c.Session = SessionPath(c.Project, c.Seat, "main.jsonl")
		}, protocol.CodeConfiguration, "no session file"},
		{"pi engine settings", func(_ *testing.T, c *Conversation) { c.Engine.Provider = "x" }, protocol.CodeConfiguration, "[engine]"},
		{"no claude table", func(_ *testing.T, c *Conversation) { c.Claude = nil }, protocol.CodeConfiguration, "[claude]"},
		{"claude table on pi", func(_ *testing.T, c *Conversation) { c.EngineKind = "" }, protocol.CodeConfiguration, "engine_kind"},
		{"unknown kind", func(_ *testing.T, c *Conversation) { c.EngineKind = "codex" }, protocol.CodeConfiguration, "engine_kind"},
		{"session not a uuid", func(_ *testing.T, c *Conversation) {
			c.Claude.Session = "../../x"
			c.ID = ID(c.Project, c.Seat, c.Claude.Session)
		}, protocol.CodeConfiguration, "claude.session"},
		{"id of another session", func(_ *testing.T, c *Conversation) {
			c.ID = ID(c.Project, c.Seat, "main.jsonl")
		}, protocol.CodeConfiguration, "id"},
		{"relative binary", func(_ *testing.T, c *Conversation) { c.Claude.Path = "claude" }, protocol.CodeConfiguration, "claude.path"},
		{"bad sha", func(_ *testing.T, c *Conversation) { c.Claude.SHA256 = "x" }, protocol.CodeConfiguration, "claude.sha256"},
		{"model that is a flag", func(_ *testing.T, c *Conversation) { c.Claude.Model = "--dangerously-skip-permissions" }, protocol.CodeConfiguration, "claude.model"},
		{"relative env file", func(_ *testing.T, c *Conversation) { c.Claude.EnvFile = "claude.env" }, protocol.CodeConfiguration, "env_file"},
		{"env file readable by others", func(t *testing.T, c *Conversation) {
			if err := os.Chmod(c.Claude.EnvFile, 0o644); err != nil {
				t.Fatal(err)
			}
		}, protocol.CodeEnvFile, ""},
		{"env file name not allowed", func(t *testing.T, c *Conversation) {
			if err := os.WriteFile(c.Claude.EnvFile, []byte("ANTHROPIC_API_KEY=k\nLD_PRELOAD=/tmp/x.so\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, protocol.CodeEnvFile, "LD_PRELOAD"},
		{"env file missing", func(t *testing.T, c *Conversation) { os.Remove(c.Claude.EnvFile) }, protocol.CodeEnvFile, ""},
		{"adopted session without transcript", func(_ *testing.T, c *Conversation) { c.Claude.Adopted = true }, protocol.CodeConfiguration, "no transcript"},
		{"adopted session with transcript", func(t *testing.T, c *Conversation) {
			c.Claude.Adopted = true
			state, err := StateDir()
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(ClaudeDirs(state, c.ID).Config, "projects", hclaude.Slug(c.Project))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			line := `{"type":"user","uuid":"11111111-1111-4111-8111-111111111111","parentUuid":null,"sessionId":"` + testUUID +
				`","version":"2.1.328","cwd":"` + c.Project + `","isSidechain":false,"message":{"role":"user","content":"hi"}}` + "\n"
			if err := os.WriteFile(filepath.Join(dir, testUUID+".jsonl"), []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claudeFixture(t)
			tt.mutate(t, c)
			err := c.Validate()
			if err == nil {
				err = c.CheckPaths()
			}
			if tt.code == "" {
				if err != nil {
					t.Fatalf("valid conversation refused: %v", err)
				}
				return
			}
			if protocol.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v (code %q); want %s naming %q", err, protocol.CodeOf(err), tt.code, tt.want)
			}
		})
	}
}

// TestClaudeConversationRoundTrip: the store keeps the kind and the
// [claude] table, Same tells a changed pin apart, and the engine
// configuration carries the pin, session, model and env file.
func TestClaudeConversationRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
	c := claudeFixture(t)
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Same(c) || !got.IsClaude() || got.SessionKey() != testUUID {
		t.Fatalf("round trip: got %+v %+v", got, got.Claude)
	}
	other := *got
	cl := *got.Claude
	cl.SHA256 = strings.Repeat("cd", 32)
	other.Claude = &cl
	if other.Same(c) {
		t.Fatal("Same ignores a changed pin")
	}
	cfg := got.ClaudeConfig(ClaudeDirs("/state", c.ID), nil)
	if cfg.Pin.SHA256 != c.Claude.SHA256 || cfg.Session != testUUID || cfg.Model != c.Claude.Model ||
		cfg.EnvFile != c.Claude.EnvFile || cfg.ProjectRoot != c.Project || cfg.Dirs.Config != "/state/claude/"+c.ID+"/config" {
		t.Fatalf("config %+v", cfg)
	}
	b, _ := os.ReadFile(s.path(c.ID))
	for _, want := range []string{`engine_kind = "claude"`, "[claude]", `session = "` + testUUID + `"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("file lacks %s:\n%s", want, b)
		}
	}
	pi := fixture(t)
	if pi.Kind() != engine.KindPi || pi.IsClaude() || pi.SessionKey() != pi.Session {
		t.Fatalf("a Pi conversation reads as %s", pi.Kind())
	}
}
