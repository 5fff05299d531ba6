package controller

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/claude"
)

// TestInputsOf: what no engine may change is every conversation's input
// that the controller hands an engine, the default Pi agent directory
// always (a conversation added later links what is there), never a
// directory that would take the project or the home with it; the only
// writable path under them is Pi's sessions directory, never an
// auth.json (a tool would put a key or a "!command" there for every Pi
// conversation; the controller relays OAuth refreshes: authrelay.go).
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
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/.pi/agent/auth.json"}, []string{"/h/.pi/agent/sessions"}},
		{"another agent directory, an env file", "/h/p", []*conversations.Conversation{pi(""), pi("/h/alt/agent/"), claude("/h/keys/c.env"), claude("/h/keys/c.env")},
			[]string{"/h/keys/c.env", "/h/.pi/agent", "/h/.pi/agent/models.json", "/h/.pi/agent/auth.json", "/h/alt/agent", "/h/alt/agent/models.json", "/h/alt/agent/auth.json"},
			[]string{"/h/.pi/agent/sessions", "/h/alt/agent/sessions"}},
		{"the home and the project's parent: their models.json and auth.json alone", "/h/work/p", []*conversations.Conversation{pi("/h"), pi("/h/work"), pi("/h/work/p"), pi("/")},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/.pi/agent/auth.json", "/h/models.json", "/h/auth.json", "/h/work/models.json", "/h/work/auth.json",
				"/h/work/p/models.json", "/h/work/p/auth.json", "/models.json", "/auth.json"},
			[]string{"/h/.pi/agent/sessions"}},
		{"a session in an agent directory, and one in its sessions", "/h/p",
			[]*conversations.Conversation{{ID: "pi-2", Session: "/h/.pi/agent/sessions/x/s.jsonl"}, {ID: "pi-3", Engine: conversations.Engine{AgentDir: "/h/a2"}, Session: "/h/a2/s.jsonl"}},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/.pi/agent/auth.json", "/h/a2/models.json", "/h/a2/auth.json"}, []string{"/h/.pi/agent/sessions"}},
		{"a Claude conversation without settings", "/h/p", []*conversations.Conversation{{ID: "cl-2", EngineKind: "claude"}, nil},
			[]string{"/h/.pi/agent", "/h/.pi/agent/models.json", "/h/.pi/agent/auth.json"}, []string{"/h/.pi/agent/sessions"}},
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
// bind: the default agent directory and every conversation's, an empty
// models.json and auth.json where a directory left writable has none (a
// tool would make one there, and the next conversation would take it),
// and a placeholder at a Claude conversation's missing env file (a tool
// would write ANTHROPIC_BASE_URL there); the user's own are left as they
// are.
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
		name, agentDir, models, auth string
	}{
		{"the project's parent, without models.json", work, emptyOf["models.json"], emptyOf["auth.json"]},
		{"another directory, with the user's", other, `{"providers":{"mine":{}}}`, ""},
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
			ro, _, _, _ := c.inputs()
			if !slices.Contains(ro, filepath.Join(tc.agentDir, "models.json")) {
				t.Fatalf("%s/models.json not read-only: %q", tc.agentDir, ro)
			}
			if b, err := os.ReadFile(filepath.Join(tc.agentDir, "models.json")); err != nil || string(b) != tc.models {
				t.Errorf("models.json = %q, %v; want %q", b, err, tc.models)
			}
			// A directory bound whole has a missing auth.json kept from
			// being made by its bind, not by one of its own.
			if slices.Contains(ro, filepath.Join(tc.agentDir, "auth.json")) != (tc.auth != "") {
				t.Fatalf("%s/auth.json (want it made: %v) read-only: %q", tc.agentDir, tc.auth != "", ro)
			}
			if b, _ := os.ReadFile(filepath.Join(tc.agentDir, "auth.json")); string(b) != tc.auth {
				t.Errorf("auth.json = %q; want %q", b, tc.auth)
			}
			if st, err := os.Stat(filepath.Join(home, ".pi", "agent")); err != nil || !st.IsDir() {
				t.Errorf("the default agent directory was not made: %v", err)
			}
		})
	}
	t.Run("Claude env files", func(t *testing.T) {
		notes := filepath.Join(home, "notes")
		if err := os.MkdirAll(notes, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(notes, "todo.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		keys, missing, theirs := filepath.Join(home, "keys", "c.env"), filepath.Join(notes, "missing.env"), filepath.Join(home, "mine.env")
		if err := os.WriteFile(theirs, []byte("ANTHROPIC_API_KEY=sk-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cl := func(env string) *conversations.Conversation {
			return &conversations.Conversation{ID: "cl-1", Project: project, EngineKind: "claude", Claude: &conversations.Claude{EnvFile: env}}
		}
		// A tool's link in place of a key directory, to the home: masked
		// or bound, the whole home would be, in every engine.
		link := filepath.Join(home, "link")
		if err := os.Symlink(home, link); err != nil {
			t.Fatal(err)
		}
		linked := filepath.Join(link, "c.env")
		// A file where the env file's directory should be: a mask would
		// fail every launch (a directory cannot be made there).
		plain := filepath.Join(home, "plain")
		if err := os.WriteFile(plain, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		underFile := filepath.Join(plain, "c.env")
		config := filepath.Join(home, "config", "mosaic")
		inConfig := filepath.Join(config, "keys", "c.env") // the README's: under the configuration directory's mask
		for _, tc := range []struct {
			env, masked string // masked: the directory, or the file alone
		}{
			{keys, filepath.Dir(keys)}, // a directory of keys alone (made by the mask)
			{missing, missing},         // beside a note: masked alone, a placeholder made
			{theirs, theirs},           // in the home: masked alone, left as it is
			{linked, ""},               // through a link: left alone
			{underFile, ""},            // under a file: left alone
			{inConfig, ""},             // under mosaic's configuration directory: masked with it
		} {
			c := &Controller{cfg: Config{Conversation: cl(tc.env)}}
			ro, _, hide, _ := c.inputs()
			if len(hide) == 0 || hide[0] != config {
				t.Errorf("%s: masked %q; want mosaic's configuration directory %s first", tc.env, hide, config)
			} else {
				hide = hide[1:]
			}
			if tc.masked == "" {
				if len(hide) != 0 || slices.ContainsFunc(ro, func(p string) bool { return strings.HasPrefix(p, link) || strings.HasPrefix(p, plain) || p == tc.env }) {
					t.Errorf("%s: masked %q, read-only %q; want it left alone", tc.env, hide, ro)
				}
				if _, err := os.Lstat(filepath.Join(home, "c.env")); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a placeholder was made through the link: %v", err)
				}
				continue
			}
			if !slices.Equal(hide, []string{tc.masked}) || slices.Contains(ro, tc.env) {
				t.Errorf("%s: masked %q, read-only %q; want %s masked", tc.env, hide, ro, tc.masked)
			}
		}
		for _, p := range []string{keys, inConfig} {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a placeholder was made in a masked directory: %v", err)
			}
		}
		if b, err := os.ReadFile(missing); err != nil || string(b) != claude.PlaceholderEnvFile {
			t.Errorf("the missing env file holds %q, %v", b, err)
		}
		if st, err := os.Stat(missing); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("the placeholder's mode: %v", err)
		}
		if b, _ := os.ReadFile(theirs); string(b) != "ANTHROPIC_API_KEY=sk-1\n" {
			t.Errorf("the user's env file was changed: %q", b)
		}
	})
}

// TestKeyMasks: every engine gets every env file masked; its directory
// whole only when it holds env files alone, no project, session or agent
// directory, and does not lie in the launching conversation's project.
func TestKeyMasks(t *testing.T) {
	root := t.TempDir()
	mk := func(files ...string) string {
		d, err := os.MkdirTemp(root, "d")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(d, f)
			switch {
			case strings.HasSuffix(f, "/"):
				err = os.Mkdir(p, 0o700)
			case strings.HasPrefix(f, ".#"):
				err = os.Symlink("user@host.1234:1", p) // an editor's lock
			default:
				err = os.WriteFile(p, nil, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	cl := func(project, env string) *conversations.Conversation {
		return &conversations.Conversation{ID: "cl", Project: project, EngineKind: "claude", Claude: &conversations.Claude{EnvFile: env}}
	}
	keys, named, other, sub := mk("a.env", "b.env"), mk("claude.keys"), mk("a.env", "notes.txt"), mk("a.env", "x/")
	edited := mk("a.env", "a.env~", "a.env.bak", "#a.env#", ".a.env.swp", ".#a.env", "claude.keys", "claude.keys~")
	notLeft := mk("a.env", "a.txt~", ".#notes")
	bare := mk("a.env", ".swp") // a suffix alone names no key
	proj, elsewhere := mk("a.env"), mk()
	for _, tc := range []struct {
		name    string
		cv, own *conversations.Conversation // own: the launching conversation; nil is cv
		dir     bool                        // the directory masked, else the file alone
	}{
		{"only *.env files", cl("", filepath.Join(keys, "a.env")), nil, true},
		{"a file a conversation names", cl("", filepath.Join(named, "claude.keys")), nil, true},
		{"another file beside it", cl("", filepath.Join(other, "a.env")), nil, false},
		{"an editor's leftovers of its keys beside it", cl("", filepath.Join(edited, "claude.keys")), nil, true},
		{"leftovers of other files beside it", cl("", filepath.Join(notLeft, "a.env")), nil, false},
		{"a swap file's suffix alone beside it", cl("", filepath.Join(bare, "a.env")), nil, false},
		{"a directory beside it", cl("", filepath.Join(sub, "a.env")), nil, false},
		{"missing: the mask makes it", cl("", filepath.Join(root, "none", "a.env")), nil, true},
		{"a project's directory", cl(proj, filepath.Join(proj, "a.env")), nil, false},
		{"a directory in the project", cl(filepath.Dir(keys), filepath.Join(keys, "a.env")), nil, false},
		{"a directory in another's project", cl(filepath.Dir(keys), filepath.Join(keys, "a.env")), cl(elsewhere, ""), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := tc.own
			if own == nil {
				own = tc.cv
			}
			env := tc.cv.Claude.EnvFile
			want := env
			if tc.dir {
				want = filepath.Dir(env)
			}
			if got := keyMasks(own, []*conversations.Conversation{own, tc.cv}, []string{env}, nil, ""); !slices.Equal(got, []string{want}) {
				t.Errorf("keyMasks = %q, want %q", got, want)
			}
		})
	}
	t.Run("each once, a file under a masked directory left to it", func(t *testing.T) {
		a, b, c := cl("", filepath.Join(keys, "a.env")), cl("", filepath.Join(keys, "b.env")), cl("", filepath.Join(other, "a.env"))
		got := keyMasks(a, []*conversations.Conversation{a, b, c, c}, []string{a.Claude.EnvFile, b.Claude.EnvFile, c.Claude.EnvFile}, nil, "")
		if want := []string{keys, c.Claude.EnvFile}; !slices.Equal(got, want) {
			t.Errorf("keyMasks = %q, want %q", got, want)
		}
	})
	// mosaic's configuration directory is masked whole, missing or
	// beside other files, and its env files need no mask of their own,
	// unless it holds what an engine works in.
	config := mk("conversations/", "notes.txt")
	inConfig := filepath.Join(config, "keys", "a.env")
	for _, tc := range []struct {
		name   string
		config string
		cvs    []*conversations.Conversation
		agents []string
		want   []string
	}{
		{"the configuration directory, its keys under it", config,
			[]*conversations.Conversation{cl(elsewhere, inConfig), cl("", filepath.Join(other, "a.env"))}, nil,
			[]string{config, filepath.Join(other, "a.env")}},
		{"missing: the mask makes it", filepath.Join(root, "no-config"),
			[]*conversations.Conversation{cl(elsewhere, filepath.Join(keys, "a.env"))}, nil,
			[]string{filepath.Join(root, "no-config"), keys}},
		{"holding a project", config,
			[]*conversations.Conversation{cl(elsewhere, inConfig), cl(filepath.Join(config, "work"), "")}, nil,
			[]string{filepath.Dir(inConfig)}},
		{"holding an agent directory", config,
			[]*conversations.Conversation{cl(elsewhere, inConfig)}, []string{filepath.Join(config, "agent")},
			[]string{filepath.Dir(inConfig)}},
		{"the launching conversation's project holds it", config,
			[]*conversations.Conversation{cl(filepath.Dir(config), inConfig)}, nil,
			[]string{config}},
		{"holding another conversation's agent directory: its keys directory still masked", config,
			[]*conversations.Conversation{cl(elsewhere, ""), {ID: "pi", Project: elsewhere, Engine: conversations.Engine{AgentDir: filepath.Join(config, "pi")}}}, nil,
			[]string{filepath.Join(config, "keys")}},
		{"holding an engine's binary", config,
			[]*conversations.Conversation{withBinary(cl(elsewhere, inConfig), filepath.Join(config, "bin", "claude"))}, nil,
			[]string{filepath.Dir(inConfig)}},
		{"holding a Pi extension", config,
			[]*conversations.Conversation{cl(elsewhere, inConfig), {ID: "pi", Project: elsewhere, Engine: conversations.Engine{Extensions: []conversations.Extension{{Path: filepath.Join(config, "ext", "x.ts")}}}}}, nil,
			[]string{filepath.Dir(inConfig)}},
		{"its keys directory holding an engine's binary: the key alone", config,
			[]*conversations.Conversation{withBinary(cl(elsewhere, inConfig), filepath.Join(config, "keys", "claude"))}, nil,
			[]string{inConfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ro []string
			for _, cv := range tc.cvs {
				if cv.Claude != nil && cv.Claude.EnvFile != "" {
					ro = append(ro, cv.Claude.EnvFile)
				}
			}
			if got := keyMasks(tc.cvs[0], tc.cvs, ro, tc.agents, tc.config); !slices.Equal(got, tc.want) {
				t.Errorf("keyMasks = %q, want %q", got, tc.want)
			}
		})
	}
}

// withBinary is cv with its Claude binary at path.
func withBinary(cv *conversations.Conversation, path string) *conversations.Conversation {
	cv.Claude.Path = path
	return cv
}

// TestInputsNameUnreadSettings: a conversation whose settings do not
// load has inputs nobody can name; the launch is told which, to journal
// it, and still protects what it can.
func TestInputsNameUnreadSettings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	dir, err := conversations.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bad := "pi-0123456789abcdef0123"
	if err := os.WriteFile(filepath.Join(dir, bad+".toml"), []byte("engine = [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Controller{cfg: Config{Conversation: &conversations.Conversation{ID: "pi-1", Project: filepath.Join(home, "p")}}}
	ro, _, _, unread := c.inputs()
	if !strings.Contains(unread, bad) {
		t.Errorf("unread = %q, want it to name %s", unread, bad)
	}
	if !slices.Contains(ro, filepath.Join(home, ".pi", "agent")) {
		t.Errorf("the default agent directory is not read-only: %q", ro)
	}
}

// TestConfigMask: mosaic's configuration directory is masked whole unless
// it holds a guarded path, written or as links resolve; its keys
// directory then is, unless it holds one as written; and neither where a
// tool of an older engine left something else than a directory there.
func TestConfigMask(t *testing.T) {
	root := t.TempDir()
	mkdir := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, p string) string {
		t.Helper()
		mkdir(filepath.Dir(p))
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := mkdir(filepath.Join(root, "config", "mosaic"))
	keys := filepath.Join(config, "keys")
	elsewhere := mkdir(filepath.Join(root, "elsewhere"))
	// ~/.config a link into a dotfiles tree, whose mosaic directory holds
	// a Claude binary pinned by its real path.
	dotfiles := mkdir(filepath.Join(root, "dotfiles", "config", "mosaic", "bin"))
	linkedConfig := filepath.Join(link(filepath.Dir(filepath.Dir(dotfiles)), filepath.Join(root, "home", ".config")), "mosaic")
	// An agent directory named through a link into the configuration
	// directory.
	agentLink := link(mkdir(filepath.Join(config, "pi-agent")), filepath.Join(root, "pi-agent-link"))
	// What a tool of an engine older than this mask could have left at
	// keys: a link to the home, a file.
	tooled := mkdir(filepath.Join(root, "tooled", "mosaic"))
	link(root, filepath.Join(tooled, "keys"))
	filed := mkdir(filepath.Join(root, "filed", "mosaic"))
	if err := os.WriteFile(filepath.Join(filed, "keys"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		config          string
		guarded, agents []string
		mask            string
	}{
		{"nothing in it", config, []string{elsewhere}, nil, config},
		{"an agent directory in it", config, []string{filepath.Join(config, "pi")}, nil, keys},
		{"an agent directory typed through keys/..", config, nil, []string{keys + "/../pi-agent"}, keys},
		{"an agent directory typed as keys/.., the directory itself", config, nil, []string{keys + "/.."}, keys},
		{"an agent directory named through a link into it", config, nil, []string{agentLink}, keys},
		{"a project in its keys directory", config, []string{filepath.Join(keys, "proj")}, nil, ""},
		{"written through a link, holding a binary by its real path", linkedConfig, []string{filepath.Join(dotfiles, "claude")}, nil, filepath.Join(linkedConfig, "keys")},
		{"a link where its keys directory should be", tooled, []string{filepath.Join(tooled, "pi")}, nil, ""},
		{"a file where its keys directory should be", filed, []string{filepath.Join(filed, "pi")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cvs []*conversations.Conversation
			for _, a := range tc.agents {
				cvs = append(cvs, &conversations.Conversation{ID: "pi", Project: elsewhere, Engine: conversations.Engine{AgentDir: a}})
			}
			guarded := append(guardedPaths(cvs, nil), tc.guarded...)
			var agents []string
			for _, a := range tc.agents {
				agents = append(agents, filepath.Clean(a))
			}
			if mask, held := configMask(tc.config, guarded, agents); mask != tc.mask || (tc.mask != tc.config) != (held != "") {
				t.Errorf("configMask = %q (held by %q), want %q", mask, held, tc.mask)
			}
		})
	}
}
