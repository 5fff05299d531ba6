package history

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture)
		code  string
	}{
		{"symlinked session file", func(t *testing.T, f *fixture) {
			real := filepath.Join(f.root, "real.jsonl")
			if err := os.WriteFile(real, []byte(hdr), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, f.path); err != nil {
				t.Fatal(err)
			}
		}, "unsafe-path"},
		{"dangling symlink", func(t *testing.T, f *fixture) {
			if err := os.Symlink(filepath.Join(f.root, "nowhere"), f.path); err != nil {
				t.Fatal(err)
			}
		}, "unsafe-path"},
		{"symlinked sessions directory", func(t *testing.T, f *fixture) {
			other := filepath.Join(f.root, "other")
			if err := os.Mkdir(other, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(other, "s.jsonl"), []byte(hdr), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(f.dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, f.dir); err != nil {
				t.Fatal(err)
			}
		}, "unsafe-path"},
		{"directory in place of the file", func(t *testing.T, f *fixture) {
			if err := os.Mkdir(f.path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "unsafe-path"},
		{"fifo in place of the file", func(t *testing.T, f *fixture) {
			if err := unix.Mkfifo(f.path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "unsafe-path"},
		{"not a session", func(t *testing.T, f *fixture) {
			f.write(t, `{"type":"message","id":"a","parentId":null}`+"\n")
		}, "not-a-pi-session"},
		{"old version", func(t *testing.T, f *fixture) {
			f.write(t, `{"type":"session","version":2,"id":"x"}`+"\n")
		}, "not-a-pi-session"},
		{"header without id", func(t *testing.T, f *fixture) {
			f.write(t, `{"type":"session","version":3}`+"\n")
		}, "not-a-pi-session"},
		{"garbage", func(t *testing.T, f *fixture) { f.write(t, "hello world") }, "not-a-pi-session"},
		{"blank first line", func(t *testing.T, f *fixture) { f.write(t, "\n"+hdr) }, "not-a-pi-session"},
		{"truncated header", func(t *testing.T, f *fixture) { f.write(t, hdr[:30]) }, "incomplete-header"},
		{"header without LF", func(t *testing.T, f *fixture) { f.write(t, hdr[:len(hdr)-1]) }, "incomplete-header"},
		{"empty file", func(t *testing.T, f *fixture) { f.write(t, "") }, "incomplete-header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.setup(t, f)
			_, err := f.read(t)
			wantCode(t, err, tt.code)
		})
	}
}

func TestTooLarge(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hello"))
	var err error
	unchanged(t, f.root, func() { _, err = Read(f.path, Options{MaxSize: int64(len(hdr) + 10)}) })
	wantCode(t, err, "too-large")
}

func TestUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads mode 000 files")
	}
	f := newFixture(t)
	f.write(t, hdr)
	if err := os.Chmod(f.path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := f.read(t)
	wantCode(t, err, "unreadable")
}

func TestMissingIsNewConversation(t *testing.T) {
	for _, name := range []string{"missing file", "missing sessions directory"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if name == "missing sessions directory" {
				if err := os.Remove(f.dir); err != nil {
					t.Fatal(err)
				}
			}
			s := f.mustRead(t)
			if !s.New() || s.SessionID() != "" || s.LeafID() != "" || len(s.EntryIDs()) != 0 {
				t.Fatalf("new conversation: New=%v session=%q leaf=%q", s.New(), s.SessionID(), s.LeafID())
			}
			p, err := s.Page("", 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.Branch != Main || len(p.Parts) != 0 || p.More || !p.New {
				t.Fatalf("page of a new conversation: %+v", p)
			}
			// Pi creates the file lazily; the follow reads all of it.
			if name == "missing sessions directory" {
				if err := os.MkdirAll(f.dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f.write(t, hdr+msg(t, "a", "", "user", "hi")+msg(t, "b", "a", "assistant", "yo"))
			s2, err := f.follow(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := s2.Appended(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
				t.Fatalf("Appended = %v", got)
			}
			p2, err := s2.Next(p.Cursor)
			if err != nil {
				t.Fatal(err)
			}
			if got := shown(p2); len(got) != 2 {
				t.Fatalf("follow from a new conversation shows %v", got)
			}
		})
	}
}

// TestSwapBetweenStatAndOpen replaces the file after the fstatat and
// before the openat: the (dev, ino) check refuses it.
func TestSwapBetweenStatAndOpen(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr)
	dfd, err := unix.Open(f.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	var before unix.Stat_t
	if err := unix.Fstatat(dfd, "s.jsonl", &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(f.dir, "other.jsonl")
	if err := os.WriteFile(other, []byte(hdr), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, f.path); err != nil {
		t.Fatal(err)
	}
	var src *source
	unchanged(t, f.root, func() { src, err = openAt(dfd, "s.jsonl", &before, f.path, DefaultMaxSize) })
	if src != nil {
		src.f.Close()
	}
	wantCode(t, err, "unsafe-path")

	// A symlink swapped in is refused by O_NOFOLLOW itself.
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.root, "x"), f.path); err != nil {
		t.Fatal(err)
	}
	unchanged(t, f.root, func() { _, err = openAt(dfd, "s.jsonl", &before, f.path, DefaultMaxSize) })
	wantCode(t, err, "unsafe-path")
}

func TestForeignProject(t *testing.T) {
	f := newFixture(t)
	project := filepath.Join(f.root, "proj")
	link := filepath.Join(f.root, "link")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ cwd, code string }{
		{project, ""},
		{filepath.Join(project, "sub", "gone"), ""},
		{link, ""}, // compared as real paths
		{"relative/dir", "foreign-project"},
		{f.root, "foreign-project"},
		{project + "-other", "foreign-project"},
	}
	for _, tt := range tests {
		t.Run(tt.cwd, func(t *testing.T) {
			h, _ := json.Marshal(map[string]any{"type": "session", "version": 3, "id": "s", "cwd": tt.cwd})
			f.write(t, string(h)+"\n")
			var err error
			unchanged(t, f.root, func() { _, err = Read(f.path, Options{Project: project}) })
			wantCode(t, err, tt.code)
		})
	}
}
