package terminal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/history"
)

// branch is 30 one-part messages ("message 00" …) with a two-part entry
// (one block in two fragments) at parts 19 and 20, cut into pages at the
// given branch indexes as a cursor chain cuts it: newest last.
func branch(t *testing.T, cuts ...int) []*history.Page {
	t.Helper()
	var parts []history.Part
	for i := range 30 {
		if i == 19 {
			parts = append(parts,
				part("n.big", 0, false, frag(0, 0, false, text("big first half, "))),
				part("n.big", 1, true, frag(0, 1, true, text("big second half"))))
			continue
		}
		role := []string{"user", "assistant"}[i%2]
		parts = append(parts, history.Part{Entry: fmt.Sprintf("n.%d", i), Kind: history.KindMessage, Role: role, LastPart: true,
			Blocks: []history.Fragment{frag(0, 0, true, text(fmt.Sprintf("message %02d", i)))}})
	}
	var pages []*history.Page
	from := 0
	for _, to := range append(cuts, len(parts)) {
		pages = append(pages, &history.Page{From: from, Parts: parts[from:to], More: to < len(parts)})
		from = to
	}
	return pages
}

func viewOf(t *testing.T, p *history.Page) client.View {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return client.View{History: b}
}

// TestComposeJoinsPages: the newest page with the older pages prepended
// one by one renders exactly the branch read as one page: every message
// once, the entry split at a page boundary one message, and the marker
// saying what is above.
func TestComposeJoinsPages(t *testing.T) {
	whole := Compose(Older{}, viewOf(t, branch(t)[0])).Lines(60)
	if whole[0] != "-- "+MarkerBeginning+" --" {
		t.Fatalf("the whole branch starts with %q", whole[0])
	}
	for i := range 30 {
		want := fmt.Sprintf("  message %02d", i)
		if i == 19 {
			want = "  big first half, big second half"
		}
		if n := strings.Count("\n"+strings.Join(whole, "\n")+"\n", "\n"+want+"\n"); n != 1 {
			t.Fatalf("%q appears %d times in\n%s", want, n, strings.Join(whole, "\n"))
		}
	}

	pages := branch(t, 10, 20) // the boundary at 20 splits n.big
	v := viewOf(t, pages[2])
	var o Older
	got := Compose(o, v).Lines(60)
	if got[0] != "-- "+MarkerMore+" --" || got[1] != "-- history: entry n.big starts before this page --" {
		t.Fatalf("the newest page alone starts %q", got[:2])
	}
	o.Loading = true
	if got := Compose(o, v).Lines(60); got[0] != "-- "+MarkerLoading+" --" {
		t.Fatalf("while loading the first line is %q", got[0])
	}
	o.Loading = false
	o.Prepend(pages[1])
	if got := Compose(o, v).Lines(60); got[0] != "-- "+MarkerMore+" --" || strings.Contains(strings.Join(got, "\n"), "n.big") {
		t.Fatalf("two pages:\n%s", strings.Join(got, "\n"))
	}
	o.Prepend(pages[0])
	if got := Compose(o, v).Lines(60); !reflect.DeepEqual(got, whole) {
		t.Fatalf("three pages joined:\n%s\nwant the branch as one page:\n%s", strings.Join(got, "\n"), strings.Join(whole, "\n"))
	}
	var f Follow
	for _, older := range []Older{{}, {Loading: true}, o} {
		if got, want := f.Update(older, v).Lines(60), Compose(older, v).Lines(60); !reflect.DeepEqual(got, want) {
			t.Fatalf("follow with %d older parts differs from compose", len(older.Parts))
		}
	}
}

// TestScreenKeepsPlaceOnPrepend: older history prepended while the reader
// is at the top leaves every row under the marker where it was; a reader
// following the end of a long transcript keeps following it; a viewport
// that showed a whole short transcript keeps its first line at the top.
func TestScreenKeepsPlaceOnPrepend(t *testing.T) {
	const w, h = 60, 12 // 9 transcript rows
	pages := branch(t, 10, 20)
	v := viewOf(t, pages[2])
	rows := func(s *Screen) []string { return s.Render(w, h).Lines[:9] }

	t.Run("at the top", func(t *testing.T) {
		var s Screen
		var f Follow
		var o Older
		s.Transcript = f.Update(o, v)
		s.Render(w, h)
		var act Action
		for act != ActOlder {
			act, _ = s.Handle(Key{Kind: KeyPageUp})
		}
		before := rows(&s)
		if before[0] != "-- "+MarkerMore+" --" {
			t.Fatalf("at the top the first row is %q", before[0])
		}
		// The first prepend makes the split entry n.big whole: the rows
		// that showed its second half (marker, notice, header, text)
		// change, every row under them stays. The second changes only the
		// marker row.
		for i, p := range []*history.Page{pages[1], pages[0]} {
			keep := []int{4, 1}[i]
			o.Loading = true
			s.Transcript = f.Update(o, v)
			if got := rows(&s); got[0] != "-- "+MarkerLoading+" --" || !reflect.DeepEqual(got[1:], before[1:]) {
				t.Fatalf("loading moved the rows:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
			}
			o.Loading = false
			o.Prepend(p)
			s.Transcript = f.Update(o, v)
			got := rows(&s)
			if !reflect.DeepEqual(got[keep:], before[keep:]) {
				t.Fatalf("the prepend moved the rows:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
			}
			if got[0] == before[0] {
				t.Fatalf("the first row is still %q: nothing was prepended above the viewport", got[0])
			}
			for act != ActOlder || s.top != 0 {
				act, _ = s.Handle(Key{Kind: KeyPageUp})
			}
			before = rows(&s)
		}
		if before[0] != "-- "+MarkerBeginning+" --" || before[1] != "[user]" || before[2] != "  message 00" {
			t.Fatalf("after the last page the top is\n%s", strings.Join(before, "\n"))
		}
	})

	t.Run("following the end", func(t *testing.T) {
		var s Screen
		var o Older
		s.Transcript = Compose(o, v)
		before := rows(&s)
		o.Prepend(pages[1])
		s.Transcript = Compose(o, v)
		if got := rows(&s); !reflect.DeepEqual(got, before) {
			t.Fatalf("the end moved:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	})

	t.Run("a short transcript shown whole", func(t *testing.T) {
		short := branch(t, 28)
		var s Screen
		var o Older
		s.Transcript = Compose(o, viewOf(t, short[1]))
		before := rows(&s)
		if before[0] != "-- "+MarkerMore+" --" || before[len(before)-1] != "" {
			t.Fatalf("the short page does not fit: %q", before)
		}
		if act, _ := s.Handle(Key{Kind: KeyPageUp}); act != ActOlder {
			t.Fatalf("PageUp on a whole transcript asked for %v", act)
		}
		o.Prepend(short[0])
		s.Transcript = Compose(o, viewOf(t, short[1]))
		// Too little is below the old first line to keep it at the top
		// without blank rows: the viewport follows the end, all of the old
		// messages still in view.
		got := rows(&s)
		if !reflect.DeepEqual(got[len(got)-6:], before[1:7]) || got[0] == before[0] || s.scrolled {
			t.Fatalf("the messages left the view (scrolled %v):\n%s\nwas\n%s", s.scrolled, strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	})
}
