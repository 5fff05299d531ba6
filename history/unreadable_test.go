package history

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestUnreadableLinesBounded (mutant 308): a session file may hold at most
// maxUnreadable lines that are not entries, read whole or followed: Pi
// writes none but a torn line, and each is a notice the snapshot keeps.
// One more is not-a-pi-session, which the controller's session watch
// takes for another writer.
func TestUnreadableLinesBounded(t *testing.T) {
	junk := func(n int) string { return strings.Repeat("1\n", n) }
	tests := []struct {
		name         string
		before, then string // the file Read, then what is appended and followed
		refused      bool
	}{
		{"read at the bound", hdr + msg(t, "a", "", "user", "hi") + junk(maxUnreadable), "", false},
		{"read past the bound", hdr + junk(maxUnreadable+1), "", true},
		{"followed at the bound", hdr + junk(maxUnreadable/2), junk(maxUnreadable / 2), false},
		{"followed past the bound", hdr + junk(maxUnreadable/2), msg(t, "a", "", "user", "hi") + junk(maxUnreadable/2+1), true},
		{"second headers count", hdr + junk(maxUnreadable), hdr, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, tc.before)
			s, err := Read(f.path, Options{})
			if tc.then != "" {
				if err != nil {
					t.Fatalf("read before the append: %v", err)
				}
				f.append(t, tc.then)
				s, err = Follow(f.path, s, Options{})
			}
			switch {
			case tc.refused && protocol.CodeOf(err) != protocol.CodeNotAPiSession:
				t.Fatalf("got %v, want %s", err, protocol.CodeNotAPiSession)
			case !tc.refused && err != nil:
				t.Fatalf("refused at the bound: %v", err)
			case !tc.refused:
				p, err := s.Page(s.DefaultBranch(), 0)
				if err != nil || len(p.Parts) == 0 || p.Parts[len(p.Parts)-1].Notice == nil {
					t.Fatalf("page %v (%v): want the notices shown", shown(p), err)
				}
			}
		})
	}
}

// TestUnreadableFloodAllocatesLittle (mutant 309): following 8 MiB of
// "1\n" lines (4M lines that are not entries, what a tool can append to
// its own session file) is refused after the bound, and the scan
// allocates a few times what it read, not a record, a notice and a slab
// slot for every line.
func TestUnreadableFloodAllocatesLittle(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi"))
	prev, err := Read(f.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const flood = 8 << 20
	f.append(t, strings.Repeat("1\n", flood/2))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Follow(f.path, prev, Options{})
	runtime.ReadMemStats(&after)
	if protocol.CodeOf(err) != protocol.CodeNotAPiSession {
		t.Fatalf("got %v, want %s", err, protocol.CodeNotAPiSession)
	}
	// The appended bytes as read (about twice them, 18 MB when measured)
	// and the scan's pieces; a slab slot for every line was 160 bytes a
	// line, 80 times the flood.
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*flood {
		t.Fatalf("following %d bytes of unreadable lines allocated %d bytes, want at most %d", flood, got, 4*flood)
	}
}

// TestEntriesBounded (mutant 312): a session file may hold at most
// maxEntries entries, the shortest of which cost the controller about 16
// times their bytes; one more is too-large (a Read takes the same
// takeLines as this Follow).
func TestEntriesBounded(t *testing.T) {
	entries := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, `{"type":"x","id":"e%d"}`+"\n", i)
		}
		return b.String()
	}
	f := newFixture(t)
	f.write(t, hdr+entries(0, maxEntries-1))
	s, err := Read(f.path, Options{})
	if err != nil {
		t.Fatalf("a file below the bound: %v", err)
	}
	f.append(t, entries(maxEntries-1, 1))
	if s, err = Follow(f.path, s, Options{}); err != nil {
		t.Fatalf("a file at the bound: %v", err)
	}
	f.append(t, entries(maxEntries, 1))
	if _, err := Follow(f.path, s, Options{}); protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("followed past the bound: got %v, want %s", err, protocol.CodeTooLarge)
	}
}

func TestArrayLen(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{`[]`, 0}, {` [ ] `, 0}, {`[{}]`, 1}, {`[{},{}]`, 2}, {`[1, "a,b", [2,3], {"x":[4,5]}]`, 4},
		{`["\"],["]`, 1}, {`["\\",1]`, 2}, {`"text"`, 0}, {`null`, 0}, {`[{},{},{},{},{}]`, 4}, // past the limit of 3: 4
	} {
		if got := ArrayLen([]byte(tc.raw), 3); got != tc.want && !(tc.want > 3 && got > 3) {
			t.Errorf("ArrayLen(%s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}

// TestBlocksBounded (mutant 318): a message of MaxBlocks content blocks is
// shown; one of more is a malformed-entry notice in its place, never
// decoded: a tool's message of 4M `{}` blocks (12 MB) held 0.5 GB after a
// read and 1.2 GB after a page.
func TestBlocksBounded(t *testing.T) {
	line := func(id, parent string, n int) string {
		return `{"type":"message","id":"` + id + `","parentId":` + parent + `,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, n), ",") + "]}}\n"
	}
	f := newFixture(t)
	// The second's escaped id keeps the light scan from taking it: it is
	// parsed in full at once.
	f.write(t, hdr+line("a", "null", MaxBlocks)+line("b\u0062", `"a"`, 1<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := Read(f.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Page(s.DefaultBranch(), 0)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	var notices, blocks int
	for _, pt := range p.Parts {
		if pt.Notice != nil && pt.Notice.Code == NoticeMalformedEntry {
			notices++
		}
		blocks += len(pt.Blocks)
	}
	if notices != 1 || blocks < MaxBlocks {
		t.Fatalf("page: %d malformed-entry notices, %d blocks; want the message of %d shown and the larger one a notice", notices, blocks, MaxBlocks)
	}
	// The line read, and copied by the decoders that set it aside (4.2
	// times it when measured); decoded, its blocks were 150 bytes each.
	size := len(line("b\u0062", `"a"`, 1<<20))
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*size) {
		t.Fatalf("reading a message of 1M blocks (%d bytes) allocated %d bytes, want at most %d", size, got, 8*size)
	}
}
