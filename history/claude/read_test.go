package claude

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

const (
	goldenSession = "fb45a767-d14b-4efd-a4eb-cffcf589f9f1"
	goldenCwd     = "/scratch/scratch/golden/work"
	// goldenLeaf is the interrupted prompt's marker line, the last entry.
	goldenLeaf = "8c02e6fc-aab5-4f73-91e6-abdf1aed7dad"
	// goldenFork is the assistant "TOOL_DONE: started-via-updatedInput":
	// a branch forked there continues before the denied command.
	goldenFork = "91cd7f15"
)

// setup writes the golden transcript (moved to project) where Ref points
// and returns the Ref and the transcript's path.
func setup(t *testing.T, edit func(string) string) (Ref, string) {
	t.Helper()
	b, err := os.ReadFile("testdata/transcript_golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(t.TempDir(), "work")
	ref := Ref{ConfigDir: t.TempDir(), Project: project, Session: goldenSession}
	body := strings.ReplaceAll(string(b), goldenCwd, project)
	if edit != nil {
		body = edit(body)
	}
	p, err := ref.Path()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return ref, p
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var r *protocol.Refusal
	if !errors.As(err, &r) || r.Code != code {
		t.Fatalf("err = %v, want refusal %s", err, code)
	}
}

func fullID(t *testing.T, tr *Transcript, prefix string) string {
	t.Helper()
	for _, id := range tr.order {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	t.Fatalf("no entry %s", prefix)
	return ""
}

// TestL1DefaultLeafAndBranches: the default leaf is the newest childless
// entry (the one --resume continues); a fork's other branch stays
// readable by its leaf; bookkeeping lines are not rendered.
func TestL1DefaultLeafAndBranches(t *testing.T) {
	ref, _ := setup(t, nil)
	tr, err := Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	if tr.DefaultLeaf() != goldenLeaf || tr.LastPromptLeaf != goldenLeaf {
		t.Fatalf("default leaf %s (last-prompt %s), want %s", tr.DefaultLeaf(), tr.LastPromptLeaf, goldenLeaf)
	}
	msgs, err := tr.Messages("")
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Role != "user" || msgs[0].Blocks[0].Text != "hello there" || msgs[len(msgs)-1].Blocks[0].Text != "[Request interrupted by user]" {
		t.Fatalf("default branch %+v ... %+v", msgs[0], msgs[len(msgs)-1])
	}
	roles := map[string]int{}
	for _, m := range msgs {
		roles[m.Role]++
	}
	if roles["toolResult"] != 2 || roles["assistant"] == 0 || tr.Bookkeeping == 0 {
		t.Errorf("roles %v, bookkeeping %d", roles, tr.Bookkeeping)
	}

	fork := fullID(t, tr, goldenFork)
	branch := `{"parentUuid":"` + fork + `","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"text","text":"edited prompt"}]},"uuid":"a0000000-0000-4000-8000-00000000000a","timestamp":"2026-12-02T18:13:00.000Z","cwd":"CWD","sessionId":"` + goldenSession + `","version":"2.1.328"}` + "\n"
	ref2, _ := setup(t, func(s string) string { return s + strings.Replace(branch, "CWD", "", 1) })
	tr2, err := Read(ref2)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr2.Leaves(); len(got) != 2 || got[0] != goldenLeaf || got[1] != "a0000000-0000-4000-8000-00000000000a" {
		t.Fatalf("leaves %v", got)
	}
	if tr2.DefaultLeaf() != "a0000000-0000-4000-8000-00000000000a" {
		t.Fatalf("default leaf %s", tr2.DefaultLeaf())
	}
	other, err := tr2.Messages(goldenLeaf)
	if err != nil || other[len(other)-1].Blocks[0].Text != "[Request interrupted by user]" {
		t.Fatalf("other branch %v %v", other, err)
	}
	def, _ := tr2.Messages("")
	if def[len(def)-2].ID != fork || def[len(def)-1].Blocks[0].Text != "edited prompt" {
		t.Fatalf("forked branch ends %+v", def[len(def)-2:])
	}
	_, err = tr2.Messages(fork)
	wantCode(t, err, protocol.CodeUnknownBranch)
}

// TestL2OtherVersionRefused: a line of another Claude Code version
// refuses unsupported-harness.
func TestL2OtherVersionRefused(t *testing.T) {
	ref, _ := setup(t, func(s string) string {
		return strings.Replace(s, `"version":"2.1.328"`, `"version":"2.1.329"`, 1)
	})
	_, err := Read(ref)
	wantCode(t, err, protocol.CodeUnsupportedHarness)
}

// TestL3DecoyNeverOpened: a decoy transcript in the same directory, named
// in no binding, is never read: the named one is, and when the named one
// does not exist yet the session is new (the decoy is not taken instead).
func TestL3DecoyNeverOpened(t *testing.T) {
	ref, p := setup(t, nil)
	decoy := filepath.Join(filepath.Dir(p), "decafbad-0000-4000-8000-000000000000.jsonl")
	body := `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"DECOY"},"uuid":"d0000000-0000-4000-8000-000000000000","sessionId":"decafbad-0000-4000-8000-000000000000","version":"2.1.328"}` + "\n"
	if err := os.WriteFile(decoy, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := tr.Messages("")
	for _, m := range msgs {
		if len(m.Blocks) > 0 && m.Blocks[0].Text == "DECOY" {
			t.Fatal("the decoy was read")
		}
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	tr, err = Read(ref)
	if err != nil || !tr.New() || tr.DefaultLeaf() != "" {
		t.Fatalf("missing named transcript: new=%v leaf=%q err=%v (the decoy must not stand in)", tr != nil && tr.New(), tr.DefaultLeaf(), err)
	}
}

// TestL4OnlyTheNamedFileSafely: a session that is not a UUID (a path
// outside the root), a symlinked transcript or project directory, and
// entries of another project are refused.
func TestL4OnlyTheNamedFileSafely(t *testing.T) {
	ref, p := setup(t, nil)
	for _, s := range []string{"../../etc/passwd", goldenSession + "/../x", "FB45A767-D14B-4EFD-A4EB-CFFCF589F9F1", ""} {
		r := ref
		r.Session = s
		_, err := Read(r)
		wantCode(t, err, protocol.CodeUnsafePath)
	}
	t.Run("symlinked file", func(t *testing.T) {
		ref, p := setup(t, nil)
		real := p + ".real"
		if err := os.Rename(p, real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, p); err != nil {
			t.Fatal(err)
		}
		_, err := Read(ref)
		wantCode(t, err, protocol.CodeUnsafePath)
	})
	t.Run("symlinked project dir", func(t *testing.T) {
		ref, p := setup(t, nil)
		dir := filepath.Dir(p)
		if err := os.Rename(dir, dir+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir+".real", dir); err != nil {
			t.Fatal(err)
		}
		_, err := Read(ref)
		wantCode(t, err, protocol.CodeUnsafePath)
	})
	t.Run("another project", func(t *testing.T) {
		other := ref
		other.Project = filepath.Join(filepath.Dir(ref.Project), "other")
		op, _ := other.Path()
		if err := os.MkdirAll(filepath.Dir(op), 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(op, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Read(other)
		wantCode(t, err, protocol.CodeForeignProject)
	})
}

// TestL5SidechainKeptApart: sidechain (subagent) entries are listed apart
// and never become a main branch or part of one.
func TestL5SidechainKeptApart(t *testing.T) {
	var side string
	ref, _ := setup(t, func(s string) string {
		side = `{"parentUuid":"` + goldenLeaf + `","isSidechain":true,"agentId":"a1","type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"SUBAGENT"}]},"uuid":"5ade0000-0000-4000-8000-000000000001","sessionId":"` + goldenSession + `","version":"2.1.328"}` + "\n"
		return s + side
	})
	tr, err := Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	if tr.DefaultLeaf() != goldenLeaf || slices.Contains(tr.Leaves(), "5ade0000-0000-4000-8000-000000000001") {
		t.Fatalf("sidechain entry became a leaf: %v", tr.Leaves())
	}
	msgs, _ := tr.Messages("")
	for _, m := range msgs {
		if len(m.Blocks) > 0 && m.Blocks[0].Text == "SUBAGENT" {
			t.Fatal("sidechain merged into the main branch")
		}
	}
	if sc := tr.Sidechain(); len(sc) != 1 || sc[0].Blocks[0].Text != "SUBAGENT" {
		t.Fatalf("sidechain %+v", sc)
	}
}

// TestL6NoWrites: reading changes nothing in the config directory (F17
// over the Claude directory): same names, modes, sizes, mtimes, bytes.
func TestL6NoWrites(t *testing.T) {
	ref, _ := setup(t, nil)
	before := snapshot(t, ref.ConfigDir)
	for i := 0; i < 3; i++ {
		tr, err := Read(ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range tr.Leaves() {
			if _, err := tr.Messages(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := snapshot(t, ref.ConfigDir); !slices.Equal(before, after) {
		t.Fatalf("the directory changed:\nbefore %v\nafter  %v", before, after)
	}
}

func snapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d %d", p, st.Mode(), st.Size(), st.ModTime().UnixNano())
		if st.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSlug: the CLI's project directory names, from the probe's paths
// and JavaScript's per-code-unit replacement.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"/var/tmp/claude-probe/scratch/golden/work": "-var-tmp-claude-probe-scratch-golden-work",
		"/home/u/My Project.v2":                     "-home-u-My-Project-v2",
		"/p/é":                                      "-p--",
		"/p/😀":                                      "-p---",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
	long := Ref{ConfigDir: "/c", Project: "/" + strings.Repeat("a", 250), Session: goldenSession}
	_, err := long.Path()
	wantCode(t, err, protocol.CodeUnsafePath)
}

// TestEntryIDsAreBounded: an entry named, or naming its parent, by an id
// over MaxEntryID bytes (which every record naming the leaf would carry)
// is refused unreadable, whichever of the two it is; an id a host chose
// for its prompt, which Claude Code 2.1.328 writes verbatim (observed
// with an upper case UUID and "m1"), is read as any other, up to
// MaxEntryID bytes.
func TestEntryIDsAreBounded(t *testing.T) {
	const first = "90000000-0000-4000-8000-000000000001"
	for name, bad := range map[string]string{
		"a long entry id":   strings.Repeat("9", 3<<20),
		"one byte too long": strings.Repeat("9", MaxEntryID+1),
	} {
		for _, where := range []string{`"uuid":"`, `"parentUuid":"`} {
			t.Run(name+" as "+strings.Trim(where, `":`), func(t *testing.T) {
				ref, _ := setup(t, func(body string) string {
					if !strings.Contains(body, where+first+`"`) {
						t.Fatalf("the golden transcript lacks %s%s", where, first)
					}
					return strings.Replace(body, where+first+`"`, where+bad+`"`, 1)
				})
				_, err := Read(ref)
				wantCode(t, err, protocol.CodeUnreadable)
			})
		}
	}
	for name, id := range map[string]string{
		"an upper case UUID": strings.ToUpper("9000000a-0000-4000-8000-00000000000b"),
		"a short one":        "m1",
		"the longest":        strings.Repeat("9", MaxEntryID),
	} {
		t.Run(name+" a host chose", func(t *testing.T) {
			ref, _ := setup(t, func(body string) string { return strings.ReplaceAll(body, `"`+first+`"`, `"`+id+`"`) })
			tr, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := tr.Messages("")
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 0 || msgs[0].ID != id {
				t.Fatalf("the branch does not begin at the host's prompt %.40q: %d messages", id, len(msgs))
			}
		})
	}
}
