package claude

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// same fails unless a and b hold the same transcript.
func same(t *testing.T, a, b *Transcript) {
	t.Helper()
	if !reflect.DeepEqual(a.Order(), b.Order()) || !reflect.DeepEqual(a.Leaves(), b.Leaves()) ||
		!reflect.DeepEqual(a.Sidechain(), b.Sidechain()) || a.Bookkeeping != b.Bookkeeping || a.LastPromptLeaf != b.LastPromptLeaf {
		t.Fatalf("follow and read differ:\n%v %v %d %q\n%v %v %d %q", a.Order(), a.Leaves(), a.Bookkeeping, a.LastPromptLeaf, b.Order(), b.Leaves(), b.Bookkeeping, b.LastPromptLeaf)
	}
	for _, id := range a.Order() {
		ea, _ := a.Entry(id)
		eb, _ := b.Entry(id)
		if !reflect.DeepEqual(ea, eb) {
			t.Fatalf("entry %s: %+v, read: %+v", id, ea, eb)
		}
	}
	ma, errA := a.Messages("")
	mb, errB := b.Messages("")
	if !reflect.DeepEqual(ma, mb) || (errA == nil) != (errB == nil) {
		t.Fatalf("messages differ: %v %v", errA, errB)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestFollowMatchesRead grows the golden transcript a few lines at a time
// (and once by a line whose first bytes came alone, without LF): each
// Follow of the read before is what a fresh Read finds, and never changes
// the transcript it followed.
func TestFollowMatchesRead(t *testing.T) {
	var lines []string
	ref, path := setup(t, func(body string) string {
		lines = strings.SplitAfter(body, "\n")
		return strings.Join(lines[:3], "")
	})
	prev, err := Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < len(lines); i += 4 {
		before := prev.Order()
		add := strings.Join(lines[i:min(i+4, len(lines))], "")
		if i == 7 {
			appendTo(t, path, "  ") // a blank start of a line, its LF not written yet
			if prev, err = Follow(prev); err != nil {
				t.Fatal(err)
			}
			before = prev.Order()
			add = strings.TrimLeft(add, " ")
		}
		appendTo(t, path, add)
		now, err := Follow(prev)
		if err != nil {
			t.Fatalf("follow after line %d: %v", i, err)
		}
		fresh, err := Read(ref)
		if err != nil {
			t.Fatal(err)
		}
		same(t, now, fresh)
		if !reflect.DeepEqual(prev.Order(), before) {
			t.Fatal("Follow changed the transcript it followed")
		}
		prev = now
	}
	if len(prev.Order()) == 0 {
		t.Fatal("the golden transcript has no entries: the test proves nothing")
	}
}

// TestFollowRefusesAnotherFile: a transcript rewritten in place (same
// length), shortened or replaced by another file is source-replaced.
func TestFollowRefusesAnotherFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"rewritten in place", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			i := strings.Index(string(b), `"uuid":"`) + len(`"uuid":"`)
			b[i] ^= 1 // same length, one entry's id changed
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"shortened", func(t *testing.T, path string) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"gone", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, path := setup(t, nil)
			prev, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, path)
			_, err = Follow(prev)
			wantCode(t, err, protocol.CodeSourceReplaced)
		})
	}
}

// TestFollowAfterHalfLine: a read that ended in a half line (a line whose
// LF was not written yet) does not lower the checks of the next follow:
// the bytes read before it rewritten in place, or the file replaced, is
// still source-replaced once the line is ended.
func TestFollowAfterHalfLine(t *testing.T) {
	for _, how := range []string{"in place", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ref, path := setup(t, nil)
			prev, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			appendTo(t, path, "  ")
			if prev, err = Follow(prev); err != nil || !prev.partial {
				t.Fatalf("follow of a half line: partial %v, %v", prev != nil && prev.partial, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			i := strings.Index(string(b), `"text":"`) + len(`"text":"`)
			b[i] ^= 1 // one prompt's text changed, same length
			switch how {
			case "in place":
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteAt(b, 0)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			case "replaced":
				if err := os.WriteFile(path+".new", b, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
			}
			appendTo(t, path, "\n")
			_, err = Follow(prev)
			wantCode(t, err, protocol.CodeSourceReplaced)
		})
	}
}
