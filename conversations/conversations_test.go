package conversations

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/devices"
	"github.com/mosaic-agents/mosaic/protocol"
)

// fixture makes a project with a seat's sessions directory and returns a
// valid conversation for it.
func fixture(t *testing.T) *Conversation {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "proj")
	if err := os.MkdirAll(filepath.Join(project, ".pi", "state", "alice", "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Conversation{
		ID: ID(project, "alice", "main.jsonl"), Project: project, Seat: "alice", Workspace: DefaultWorkspace,
		Session: SessionPath(project, "alice", "main.jsonl"),
	}
}

func TestIDStableAndInstanceSafe(t *testing.T) {
	a := ID("/p", "alice", "main.jsonl")
	if a != ID("/p", "alice", "main.jsonl") {
		t.Fatal("id not stable")
	}
	for _, other := range []string{ID("/q", "alice", "main.jsonl"), ID("/p", "bob", "main.jsonl"), ID("/p", "alice", "x.jsonl")} {
		if other == a {
			t.Fatalf("different inputs share id %s", a)
		}
	}
	if !ValidID(a) {
		t.Fatalf("id %q fails its own pattern", a)
	}
	// A systemd instance name must not need escaping: only [a-z0-9-].
	if strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		t.Fatalf("id %q needs escaping as an instance name", a)
	}
}

func TestValidateAndPaths(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, c *Conversation)
		field  string // "" for valid
	}{
		{"valid, session file not yet written", func(*testing.T, *Conversation) {}, ""},
		{"relative project", func(_ *testing.T, c *Conversation) { c.Project = "proj" }, "project"},
		{"bad seat", func(_ *testing.T, c *Conversation) { c.Seat = "../x" }, "seat"},
		{"session elsewhere", func(_ *testing.T, c *Conversation) {
			c.Session = filepath.Join(c.Project, "main.jsonl")
		}, "session"},
		{"session not jsonl", func(_ *testing.T, c *Conversation) {
			c.Session = SessionPath(c.Project, c.Seat, "main.txt")
		}, "session"},
		{"id mismatch", func(_ *testing.T, c *Conversation) { c.ID = "pi-00000000000000000000" }, "id"},
		{"devices given", func(_ *testing.T, c *Conversation) { c.Devices = []string{"/dev/kvm", "/dev/dri/renderD128"} }, ""},
		{"device outside /dev", func(_ *testing.T, c *Conversation) { c.Devices = []string{"/etc/passwd"} }, "devices"},
		{"device where the engine's own ptys go", func(_ *testing.T, c *Conversation) { c.Devices = []string{"/dev/pts/3"} }, "devices"},
		{"more devices than a launch takes", func(_ *testing.T, c *Conversation) {
			c.Devices = slices.Repeat([]string{"/dev/kvm"}, devices.Max+1)
		}, "devices"},
		{"missing project", func(_ *testing.T, c *Conversation) {
			os.RemoveAll(c.Project)
		}, "project"},
		{"missing sessions dir", func(t *testing.T, c *Conversation) {
			if err := os.RemoveAll(filepath.Dir(c.Session)); err != nil {
				t.Fatal(err)
			}
		}, "session directory"},
		{"symlinked project component", func(t *testing.T, c *Conversation) {
			link := c.Project + "-link"
			if err := os.Symlink(c.Project, link); err != nil {
				t.Fatal(err)
			}
			c.Project = link
			c.Session = SessionPath(link, c.Seat, "main.jsonl")
			c.ID = ID(link, c.Seat, "main.jsonl")
		}, "is a symlink"},
		{"a file where a directory of the session should be", func(t *testing.T, c *Conversation) {
			above := filepath.Dir(filepath.Dir(c.Session))
			if err := os.RemoveAll(above); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(above, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "/alice is not a directory"},
		{"symlinked session file", func(t *testing.T, c *Conversation) {
			other := filepath.Join(c.Project, "elsewhere.jsonl")
			os.WriteFile(other, nil, 0o600)
			if err := os.Symlink(other, c.Session); err != nil {
				t.Fatal(err)
			}
		}, "symlink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fixture(t)
			tt.mutate(t, c)
			err := c.Validate()
			if err == nil {
				err = c.CheckPaths()
			}
			if tt.field == "" {
				if err != nil {
					t.Fatalf("valid conversation refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want a refusal naming %q", tt.field)
			}
			if protocol.CodeOf(err) != protocol.CodeConfiguration {
				t.Fatalf("code %q (%v), want configuration", protocol.CodeOf(err), err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("message %q does not name %q", err, tt.field)
			}
		})
	}
}

func TestStoreRoundTripAndStrictness(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
	c := fixture(t)
	c.Limits.TasksMax = TasksMax{Count: 512}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Same(c) {
		t.Fatalf("round trip: got %+v, want %+v", got, c)
	}
	fi, err := os.Stat(s.path(c.ID))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode(), err)
	}

	b, _ := os.ReadFile(s.path(c.ID))
	if err := os.WriteFile(s.path(c.ID), append(b, []byte("\ncolour = \"red\"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(c.ID)
	if protocol.CodeOf(err) != protocol.CodeConfiguration || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key: err %v; want configuration naming colour", err)
	}
	list, bad, err := s.List()
	if err != nil || len(list) != 0 || bad[c.ID] == nil {
		t.Fatalf("List with a broken file: %v %v %v", list, bad, err)
	}
}

func TestLoadUnknownAndHostileIDs(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	for _, id := range []string{"pi-00000000000000000000", "../../etc/passwd", "", "pi-ABC"} {
		_, err := s.Load(id)
		if protocol.CodeOf(err) != protocol.CodeUnknownConv {
			t.Errorf("Load(%q) = %v, want unknown-conversation", id, err)
		}
	}
}

// TestBrokenFileNamesTheWaysOut: a conversation file that does not load,
// for whatever reason, is refused configuration naming the file and both
// ways out: fix it, or `conv rm` the conversation by id.
func TestBrokenFileNamesTheWaysOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(string) string
		says string
	}{
		{"not TOML", func(b string) string { return b + "\nseat = \n" }, "line"},
		{"an unknown key", func(b string) string { return b + "\ncolour = \"red\"\n" }, "colour"},
		{"another id", func(b string) string { return strings.Replace(b, "pi-", "pi-0", 1) }, "differs from the file name"},
		{"an invalid seat", func(b string) string { return strings.Replace(b, `seat = "alice"`, `seat = "../x"`, 1) }, "seat"},
		{"a limit that does not parse", func(b string) string { return strings.Replace(b, "[limits]\n", "[limits]\nmemory_max = \"lots\"\n", 1) }, "memory_max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
			c := fixture(t)
			if err := s.Save(c); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(s.path(c.ID))
			edited := tc.edit(string(b))
			if edited == string(b) {
				t.Fatalf("the edit changed nothing in\n%s", b)
			}
			if err := os.WriteFile(s.path(c.ID), []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Load(c.ID)
			if protocol.CodeOf(err) != protocol.CodeConfiguration {
				t.Fatalf("err %v; want configuration", err)
			}
			for _, want := range []string{s.path(c.ID), tc.says, "fix the file", "mosaicctl conv rm " + c.ID} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not say %q", err, want)
				}
			}
		})
	}
}
