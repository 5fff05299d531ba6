package history

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/protocol"
)

// checkCaps asserts the CHAT-01 caps on one page.
func checkCaps(t *testing.T, p Page) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxPageBytes || len(p.Parts) > MaxPageParts {
		t.Fatalf("page of %d bytes and %d parts", len(b), len(p.Parts))
	}
	for _, pt := range p.Parts {
		if b, _ := json.Marshal(pt); len(b) > maxPartBytes+64<<10 {
			t.Fatalf("part of %d bytes", len(b))
		}
		if len(pt.Blocks) > MaxPartBlocks {
			t.Fatalf("part with %d blocks", len(pt.Blocks))
		}
		for _, f := range pt.Blocks {
			if units(f.Content.Text) > MaxStringChars || !utf8.ValidString(f.Content.Text) {
				t.Fatalf("fragment of %d units, valid UTF-8 %v", units(f.Content.Text), utf8.ValidString(f.Content.Text))
			}
		}
	}
}

// joined concatenates the fragments of every block of an entry's parts.
func joined(parts []Part, entry string) map[int]string {
	out := make(map[int]string)
	next := make(map[int]int)
	for _, p := range parts {
		if p.Entry != entry {
			continue
		}
		for _, f := range p.Blocks {
			if f.Fragment != next[f.Block] {
				panic(fmt.Sprintf("block %d fragment %d, want %d", f.Block, f.Fragment, next[f.Block]))
			}
			next[f.Block]++
			out[f.Block] += f.Content.Text
		}
	}
	return out
}

func TestLongStringSplitsOnRuneBoundaries(t *testing.T) {
	f := newFixture(t)
	// 600k characters of 1-, 2-, 3- and 4-byte runes; the 4-byte ones are
	// surrogate pairs for a JavaScript client.
	long := strings.Repeat("aé€😀<\n", 100000)
	f.write(t, hdr+msg(t, "a", "", "assistant", long))
	s := f.mustRead(t)
	p, err := s.Page("", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkCaps(t, p)
	if len(p.Parts) != 1 || len(p.Parts[0].Blocks) < 3 {
		t.Fatalf("%d parts, %d fragments", len(p.Parts), len(p.Parts[0].Blocks))
	}
	last := p.Parts[0].Blocks[len(p.Parts[0].Blocks)-1]
	if !last.LastFragment || p.Parts[0].Blocks[0].LastFragment {
		t.Fatal("lastFragment only on the last fragment")
	}
	if got := joined(p.Parts, "n.a")[0]; got != long {
		t.Fatalf("fragments join to %d bytes, want %d", len(got), len(long))
	}
}

func TestManyMessagesSplitIntoPages(t *testing.T) {
	f := newFixture(t)
	var sb strings.Builder
	sb.WriteString(hdr)
	parent := ""
	for i := range 150 {
		id := fmt.Sprintf("m%03d", i)
		sb.WriteString(msg(t, id, parent, "user", "hello "+id))
		parent = id
	}
	f.write(t, sb.String())
	s := f.mustRead(t)
	p1, err := s.Page("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Parts) != 100 || !p1.More || p1.From != 0 {
		t.Fatalf("page 1: %d parts, more %v", len(p1.Parts), p1.More)
	}
	p2, err := s.Next(p1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Parts) != 50 || p2.More || p2.From != 100 || p2.Parts[0].Entry != "n.m100" {
		t.Fatalf("page 2: %d parts from %d, more %v", len(p2.Parts), p2.From, p2.More)
	}
	checkCaps(t, p1)
	checkCaps(t, p2)
	if _, err := s.Page("", 151); err == nil {
		t.Fatal("a part index past the end was accepted")
	}
	bad := p1.Cursor
	bad.Next = -1
	if _, err := s.Next(bad); protocol.CodeOf(err) != protocol.CodeCursorUnknown {
		t.Fatalf("a cursor counting -1 parts read: %v, want %s", err, protocol.CodeCursorUnknown)
	}
}

func TestByteAndBlockCaps(t *testing.T) {
	f := newFixture(t)
	var sb strings.Builder
	sb.WriteString(hdr)
	// Six 1 MiB messages of HTML-escaped characters (6 JSON bytes each):
	// no page can hold them all.
	big := strings.Repeat("<", 1<<20)
	parent := ""
	for i := range 6 {
		id := fmt.Sprintf("big%d", i)
		sb.WriteString(msg(t, id, parent, "assistant", big))
		parent = id
	}
	// One message with 200 blocks and one tool call with 2 MiB of args.
	var blocks []any
	for i := range 200 {
		blocks = append(blocks, map[string]any{"type": "text", "text": fmt.Sprint(i)})
	}
	sb.WriteString(ent(t, "message", "many", parent, map[string]any{"message": map[string]any{"role": "assistant", "content": blocks}}))
	args := map[string]any{"content": strings.Repeat("x", 2<<20)}
	call := []any{map[string]any{"type": "toolCall", "id": "call_9", "name": "write", "arguments": args}}
	sb.WriteString(ent(t, "message", "tool", "many", map[string]any{"message": map[string]any{"role": "assistant", "content": call}}))
	f.write(t, sb.String())
	s := f.mustRead(t)

	var all []Part
	p, err := s.Page("", 0)
	for pages := 1; ; pages++ {
		if err != nil {
			t.Fatal(err)
		}
		checkCaps(t, p)
		all = append(all, p.Parts...)
		if !p.More {
			if pages < 4 {
				t.Fatalf("only %d pages", pages)
			}
			break
		}
		p, err = s.Next(p.Cursor)
	}
	if got := joined(all, "n.big3")[0]; got != big {
		t.Fatalf("big3 joins to %d bytes", len(got))
	}
	var many []Part
	for _, pt := range all {
		if pt.Entry == "n.many" {
			many = append(many, pt)
		}
	}
	if len(many) != 4 || many[3].Part != 3 || !many[3].LastPart || many[0].LastPart || many[3].Blocks[len(many[3].Blocks)-1].Block != 199 {
		t.Fatalf("200 blocks in %d parts", len(many))
	}
	tool := joined(all, "n.tool")[0]
	want, _ := json.Marshal(args)
	if tool != string(want) {
		t.Fatalf("tool args text of %d bytes, want %d", len(tool), len(want))
	}
	for _, pt := range all {
		for _, fr := range pt.Blocks {
			if pt.Entry == "n.tool" && (fr.Content.Type != "toolCall" || fr.Content.ToolCallID != "call_9" || fr.Content.Args != nil) {
				t.Fatalf("tool fragment lost its identity: %+v", fr.Content.Type)
			}
		}
	}
}

func TestFollow(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi")+msg(t, "b", "a", "assistant", "yo"))
	s1 := f.mustRead(t)
	p1, err := s1.Page("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p1.More {
		t.Fatal("more on a short page")
	}

	// Nothing appended: an empty follow.
	s2, err := f.follow(t, s1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s2.Next(p1.Cursor); err != nil || len(p.Parts) != 0 || len(s2.Appended()) != 0 {
		t.Fatalf("idle follow: %v %v %v", shown(p), s2.Appended(), err)
	}

	// Appended on main: only the new entries, half a line left out.
	fork := msg(t, "e", "a", "assistant", "fork")
	f.append(t, msg(t, "c", "b", "user", "more")+msg(t, "d", "c", "assistant", "ok")+fork[:10])
	s3, err := f.follow(t, s2)
	if err != nil {
		t.Fatal(err)
	}
	p3, err := s3.Next(p1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if got := shown(p3); !reflect.DeepEqual(got, []string{"n.c", "n.d"}) || !p3.Incomplete || p3.From != 2 {
		t.Fatalf("follow shows %v from %d, incomplete %v", got, p3.From, p3.Incomplete)
	}
	if got := s3.Appended(); !reflect.DeepEqual(got, []string{"c", "d"}) {
		t.Fatalf("Appended = %v", got)
	}
	if s3.Epoch() != s1.Epoch() || s3.LeafID() != "d" {
		t.Fatalf("epoch %q -> %q, leaf %q", s1.Epoch(), s3.Epoch(), s3.LeafID())
	}

	// The half line completes as a fork off a: a new branch, main keeps
	// its name and gets nothing.
	f.append(t, fork[10:])
	s4, err := f.follow(t, s3)
	if err != nil {
		t.Fatal(err)
	}
	p4, err := s4.Next(p3.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(p4.Parts) != 0 || p4.Branch != Main || p4.DefaultBranch != "b.e" || p4.Incomplete {
		t.Fatalf("main after a fork: %v default %q", shown(p4), p4.DefaultBranch)
	}
	// A cursor from two follows back still continues.
	if p, err := s4.Next(p1.Cursor); err != nil || !reflect.DeepEqual(shown(p), []string{"n.c", "n.d"}) {
		t.Fatalf("old cursor: %v %v", shown(p), err)
	}
	// Names are stable as the file grows.
	f.append(t, msg(t, "f", "e", "user", "on fork")+msg(t, "g", "d", "user", "on main"))
	s5, err := f.follow(t, s4)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range s5.Branches() {
		names = append(names, b.Name+"="+b.Tip)
	}
	if !reflect.DeepEqual(names, []string{"main=g", "b.e=f"}) {
		t.Fatalf("branches %v", names)
	}
	if p, err := s5.Next(p4.Cursor); err != nil || !reflect.DeepEqual(shown(p), []string{"n.g"}) {
		t.Fatalf("main after growth: %v %v", shown(p), err)
	}
	pe, err := s4.Page("b.e", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s5.Next(pe.Cursor); err != nil || !reflect.DeepEqual(shown(p), []string{"n.f"}) {
		t.Fatalf("fork after growth: %v %v", shown(p), err)
	}
	// Foreign: an appended id the controller's stream never reported.
	known := map[string]bool{"f": true}
	if got := s5.Foreign(func(id string) bool { return known[id] }); !reflect.DeepEqual(got, []string{"g"}) {
		t.Fatalf("Foreign = %v", got)
	}
}

func TestFollowRefusals(t *testing.T) {
	base := func(t *testing.T) string {
		return hdr + msg(t, "a", "", "user", "hi") + msg(t, "b", "a", "assistant", "yo")
	}
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture)
	}{
		{"in-place rewrite, same length", func(t *testing.T, f *fixture) {
			fh, err := os.OpenFile(f.path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			if _, err := fh.WriteAt([]byte("X"), int64(len(hdr)+30)); err != nil {
				t.Fatal(err)
			}
		}},
		{"in-place rewrite, longer", func(t *testing.T, f *fixture) {
			f.write(t, hdr+msg(t, "a", "", "user", "changed")+msg(t, "b", "a", "assistant", "yo")+msg(t, "c", "b", "user", "x"))
		}},
		{"truncated", func(t *testing.T, f *fixture) {
			if err := os.Truncate(f.path, int64(len(hdr))); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by rename", func(t *testing.T, f *fixture) {
			tmp := f.path + ".tmp"
			if err := os.WriteFile(tmp, []byte(base(t)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, f.path); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, f *fixture) {
			if err := os.Remove(f.path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, base(t))
			s := f.mustRead(t)
			tt.change(t, f)
			_, err := f.follow(t, s)
			wantCode(t, err, "source-replaced")
			if r := refusal(err); r == nil || !r.Reconcile {
				t.Fatal("source-replaced without reconcile")
			}
		})
	}
}

// TestFollowEarlierPartsChanged: an append that replaces an entry already
// read (duplicate id) or supplies a missing parent refuses the cursor.
func TestFollowEarlierPartsChanged(t *testing.T) {
	tests := []struct {
		name           string
		initial, added func(t *testing.T) string
	}{
		{"duplicate id replaces a read entry", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "b", "a", "assistant", "yo")
		}, func(t *testing.T) string { return msg(t, "a", "", "user", "again") }},
		{"missing parent turns up", func(t *testing.T) string {
			return hdr + msg(t, "c", "p", "user", "orphan")
		}, func(t *testing.T) string { return msg(t, "p", "", "user", "parent") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, tt.initial(t))
			s := f.mustRead(t)
			p, err := s.Page("", 0)
			if err != nil {
				t.Fatal(err)
			}
			f.append(t, tt.added(t))
			s2, err := f.follow(t, s)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s2.Next(p.Cursor)
			wantCode(t, err, "source-replaced")
		})
	}
}

// TestCursorOfAnotherChain: a cursor from a fresh Read is not accepted
// by a snapshot of another chain (different epoch).
func TestCursorOfAnotherChain(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi"))
	s1 := f.mustRead(t)
	p, err := s1.Page("", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.append(t, msg(t, "b", "a", "assistant", "yo"))
	s2 := f.mustRead(t)
	_, err = s2.Next(p.Cursor)
	wantCode(t, err, "source-replaced")
}

// TestConcurrentPages: one snapshot serves many observers at once.
func TestConcurrentPages(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi")+msg(t, "b", "a", "assistant", "one")+msg(t, "c", "a", "assistant", "two"))
	s := f.mustRead(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			branch := []string{Main, "b.c"}[i%2]
			if _, err := s.Page(branch, 0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
