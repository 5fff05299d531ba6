package controller

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
)

// TestInputsOf: what no engine may change is every conversation's input
// that the controller hands an engine, the default Pi agent directory
// always (a conversation added later links what is there), never a
// directory that would take the project or the home with it.
func TestInputsOf(t *testing.T) {
	pi := func(agentDir string) *conversations.Conversation {
		return &conversations.Conversation{ID: "pi-1", Engine: conversations.Engine{AgentDir: agentDir}}
	}
	claude := func(env string) *conversations.Conversation {
		return &conversations.Conversation{ID: "cl-1", EngineKind: "claude", Claude: &conversations.Claude{EnvFile: env}}
	}
	for _, tc := range []struct {
		name         string
		project      string
		cvs          []*conversations.Conversation
		ro, writable []string
	}{
		{"default only", "/h/p", []*conversations.Conversation{pi("")},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json"}, []string{"/h/.pi/agent/auth.json", "/h/.pi/agent/sessions"}},
		{"another agent directory, an env file", "/h/p", []*conversations.Conversation{pi(""), pi("/h/alt/agent/"), claude("/h/keys/c.env"), claude("/h/keys/c.env")},
			[]string{"/h/keys/c.env", "/h/.pi/agent", "/h/.pi/agent/models.json", "/h/alt/agent", "/h/alt/agent/models.json"},
			[]string{"/h/.pi/agent/auth.json", "/h/.pi/agent/sessions", "/h/alt/agent/auth.json", "/h/alt/agent/sessions"}},
		{"the home and the project's parent: their models.json alone", "/h/work/p", []*conversations.Conversation{pi("/h"), pi("/h/work"), pi("/h/work/p"), pi("/")},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/models.json", "/h/work/models.json", "/h/work/p/models.json", "/models.json"},
			[]string{"/h/.pi/agent/auth.json", "/h/.pi/agent/sessions"}},
		{"a session in an agent directory, and one in its sessions", "/h/p",
			[]*conversations.Conversation{{ID: "pi-2", Session: "/h/.pi/agent/sessions/x/s.jsonl"}, {ID: "pi-3", Engine: conversations.Engine{AgentDir: "/h/a2"}, Session: "/h/a2/s.jsonl"}},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/a2/models.json"}, []string{"/h/.pi/agent/auth.json", "/h/.pi/agent/sessions"}},
		{"a Claude conversation without settings", "/h/p", []*conversations.Conversation{{ID: "cl-2", EngineKind: "claude"}, nil},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json"}, []string{"/h/.pi/agent/auth.json", "/h/.pi/agent/sessions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro, writable, _, _ := inputsOf("/h", tc.project, tc.cvs)
			if !slices.Equal(ro, tc.ro) || !slices.Equal(writable, tc.writable) {
				t.Errorf("inputsOf = %q, %q; want %q, %q", ro, writable, tc.ro, tc.writable)
			}
		})
	}
}

// TestInputsMakeWhatIsBound: what the launch binds read-only is there to
// bind: the default agent directory and every conversation's, and an
// empty models.json where a directory left writable has none (a tool
// would make one there, and the next conversation would link it); a
// models.json the user has is left as it is.
func TestInputsMakeWhatIsBound(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	work, other := filepath.Join(home, "work"), filepath.Join(home, "other")
	project := filepath.Join(work, "p")
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, agentDir, models string
	}{
		{"the project's parent, without models.json", work, emptyModels},
		{"another directory, with the user's", other, `{"providers":{"mine":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.agentDir == other {
				if err := os.MkdirAll(other, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(other, "models.json"), []byte(tc.models), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cv := &conversations.Conversation{ID: "pi-1", Project: project, Engine: conversations.Engine{AgentDir: tc.agentDir}}
			c := &Controller{cfg: Config{Conversation: cv}}
			ro, _ := c.inputs()
			if !slices.Contains(ro, filepath.Join(tc.agentDir, "models.json")) {
				t.Fatalf("%s/models.json not read-only: %q", tc.agentDir, ro)
			}
			if b, err := os.ReadFile(filepath.Join(tc.agentDir, "models.json")); err != nil || string(b) != tc.models {
				t.Errorf("models.json = %q, %v; want %q", b, err, tc.models)
			}
			if st, err := os.Stat(filepath.Join(home, ".pi", "agent")); err != nil || !st.IsDir() {
				t.Errorf("the default agent directory was not made: %v", err)
			}
		})
	}
}

// TestAuthWritableOnlyWithOAuth: Pi's auth.json is bound back writable
// only when it holds an OAuth login, whose refreshed tokens Pi writes
// back; one of API keys stays read-only with its directory (a tool could
// put its own key there, or a "!command" Pi runs to read one).
func TestAuthWritableOnlyWithOAuth(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	auth := filepath.Join(home, ".pi", "agent", "auth.json")
	if err := os.MkdirAll(filepath.Dir(auth), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, content string
		writable      bool
	}{
		{"API keys", `{"anthropic":{"type":"api_key","key":"sk-1"},"openai":{"type":"api_key","key":"!pass show openai"}}`, false},
		{"an OAuth login", `{"anthropic":{"type":"oauth","access":"a","refresh":"r","expires":1}}`, true},
		{"unreadable", `{"anthropic":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(auth, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := &Controller{cfg: Config{Conversation: &conversations.Conversation{ID: "pi-1", Project: filepath.Join(home, "p")}}}
			_, writable := c.inputs()
			if got := slices.Contains(writable, auth); got != tc.writable {
				t.Errorf("auth.json writable %v, want %v (writable %q)", got, tc.writable, writable)
			}
		})
	}
}
