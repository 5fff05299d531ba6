package history

import (
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestBefore: the page before part end of a branch of 250 parts, and the
// refusals for an unknown branch and an end outside the branch. The caps
// and the paging back over a whole branch are checked through the
// controller's observe (controller.TestPageBefore).
func TestBefore(t *testing.T) {
	f := newFixture(t)
	content, parent := hdr, ""
	for i := range 250 {
		id := "m" + string(rune('a'+i/26/26%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
		content += msg(t, id, parent, "user", "hello")
		parent = id
		if i%10 == 0 {
			// State entries on the path show nothing: the cut reads more
			// items than it makes parts.
			content += ent(t, "model_change", "c"+id, parent, map[string]any{"provider": "p", "modelId": "m"})
			parent = "c" + id
		}
	}
	f.write(t, content)
	// A forward page first, so the branch is cut part of the way when
	// Count cuts the rest of it.
	fresh := f.mustRead(t)
	if _, err := fresh.Page("", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := fresh.Count(""); err != nil || n != 250 {
		t.Fatalf("Count after a forward page = %d, %v; want 250", n, err)
	}
	s := f.mustRead(t)
	n, err := s.Count("")
	if err != nil || n != 250 {
		t.Fatalf("Count = %d, %v; want 250", n, err)
	}
	all := allParts(t, s, s.DefaultBranch())
	for _, tc := range []struct {
		name       string
		branch     string
		end        int
		from, more int // want From, and 1 if More
		code       string
	}{
		{name: "newest", end: 250, from: 150},
		{name: "older", end: 120, from: 20, more: 1},
		{name: "the first parts", end: 30, from: 0, more: 1},
		{name: "nothing before the start", end: 0, from: 0, more: 1},
		{name: "past the end", end: 251, code: protocol.CodeCursorUnknown},
		{name: "negative", end: -1, code: protocol.CodeCursorUnknown},
		{name: "unknown branch", branch: "nope", end: 1, code: protocol.CodeUnknownBranch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Before(tc.branch, tc.end)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkCaps(t, p)
			if p.From != tc.from || p.From+len(p.Parts) != tc.end || p.More != (tc.more == 1) {
				t.Fatalf("From %d, %d parts, More %v; want from %d to %d, more %v", p.From, len(p.Parts), p.More, tc.from, tc.end, tc.more == 1)
			}
			for i, pt := range p.Parts {
				if pt.Entry != all[p.From+i].Entry {
					t.Fatalf("part %d is %s, want %s", p.From+i, pt.Entry, all[p.From+i].Entry)
				}
			}
		})
	}
}

// TestCountAfterACut: Count on a snapshot whose branch was already cut,
// by an earlier Count (a second observer on an unchanged session gets the
// controller's cached snapshot) or by a forward page, past an entry that
// shows nothing (the model_change every Pi session starts with): the cut
// has consumed more items than it made parts, and asking for every part
// must not overflow the range left to decode (it panicked the controller).
func TestCountAfterACut(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+ent(t, "model_change", "m", "", map[string]any{"provider": "p", "modelId": "x"})+
		msg(t, "a", "m", "user", "hello"))
	for _, tc := range []struct {
		name  string
		first func(*Snapshot) error
	}{
		{"a second Count", func(s *Snapshot) error { _, err := s.Count(""); return err }},
		{"a forward page", func(s *Snapshot) error { _, err := s.Page("", 0); return err }},
		{"the newest page", func(s *Snapshot) error { _, err := s.Before("", 1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f.mustRead(t)
			if err := tc.first(s); err != nil {
				t.Fatal(err)
			}
			n, err := s.Count("")
			if err != nil || n != 1 {
				t.Fatalf("Count = %d, %v; want 1", n, err)
			}
			p, err := s.Before("", n)
			if err != nil || len(p.Parts) != 1 || p.More {
				t.Fatalf("Before(%d) = %d parts, more %v, %v; want the one part", n, len(p.Parts), p.More, err)
			}
		})
	}
}
