package controller

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
)

// TestMark: the mark reads back the newest state written; a write cut in
// the middle (the crash the mark is kept for) leaves the state before it;
// a mark never written, or with both slots damaged, reads as none; a
// state too large for a slot drops its oldest announcements; nobody can
// change the mark's size.
func TestMark(t *testing.T) {
	state := func(size int64, announced ...string) markState {
		st := markState{Execution: "x1", Vouched: &claims.FileState{Size: size, SHA256: strings.Repeat("ab", 32)}}
		for _, id := range announced {
			st.Announced = append(st.Announced, claims.Announcement{UUID: id, Said: strings.Repeat("cd", 32)})
		}
		return st
	}
	write := func(t *testing.T, states ...markState) (*os.File, uint64) {
		t.Helper()
		f, err := newMark()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		var seq uint64
		for _, st := range states {
			if seq, err = writeMark(f, seq, st); err != nil {
				t.Fatal(err)
			}
		}
		return f, seq
	}
	// damage flips a byte of slot's payload.
	damage := func(t *testing.T, f *os.File, slot int64) {
		t.Helper()
		b := []byte{0}
		if _, err := f.ReadAt(b, slot*markSlot+markHeader+3); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, slot*markSlot+markHeader+3); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		states  []markState
		damaged []int64 // slots
		want    int64   // the vouched size read back; -1: none
	}{
		{"never written", nil, nil, -1},
		{"one write", []markState{state(10)}, nil, 10},
		{"the newest of three", []markState{state(10), state(20, "a1"), state(30, "a1", "a2")}, nil, 30},
		{"the newest cut, the one before it read", []markState{state(10), state(20), state(30)}, []int64{1}, 20},
		{"the older damaged", []markState{state(10), state(20)}, []int64{1}, 20},
		{"both damaged", []markState{state(10), state(20)}, []int64{0, 1}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, seq := write(t, tc.states...)
			for _, s := range tc.damaged {
				damage(t, f, s)
			}
			got, gotSeq, err := readMark(f)
			if tc.want < 0 {
				if !errors.Is(err, errNoMark) {
					t.Fatalf("read %+v, %v; want errNoMark", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.states[len(tc.states)-1-int(seq-gotSeq)]
			if got.Vouched == nil || got.Vouched.Size != tc.want || len(got.Announced) != len(want.Announced) {
				t.Fatalf("read %+v (seq %d of %d); want size %d with %d announcements", got, gotSeq, seq, tc.want, len(want.Announced))
			}
		})
	}
	t.Run("announcements over a slot dropped oldest first", func(t *testing.T) {
		var ids []string
		for i := range markSlot / 1000 {
			ids = append(ids, fmt.Sprintf("%04d%s", i, strings.Repeat("u", 1000)))
		}
		f, _ := write(t, state(10, ids...))
		got, _, err := readMark(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Announced); n == 0 || n >= len(ids) || got.Announced[n-1].UUID != ids[len(ids)-1] {
			t.Fatalf("read %d announcements of %d, the last %.8q; want the latest that fit", n, len(ids), got.Announced[n-1].UUID)
		}
	})
	t.Run("its size is sealed", func(t *testing.T) {
		f, _ := write(t, state(10))
		if err := f.Truncate(markSlot); err == nil {
			t.Fatal("the mark was shrunk")
		}
		if _, err := f.WriteAt([]byte{1}, 2*markSlot); err == nil {
			t.Fatal("the mark was grown")
		}
	})
}

// TestTakeMark: a mark read back at a re-attach hands over its bytes and
// announcements; one that names another execution, no bytes, too many
// announcements, or does not read hands over no bytes but an empty
// transcript's, so every line is checked again (fail closed), never
// none, which would vouch for the transcript as read.
func TestTakeMark(t *testing.T) {
	v := &claims.FileState{Size: 42, SHA256: strings.Repeat("ab", 32)}
	many := make([]claims.Announcement, claims.MaxAnnouncements+1)
	for i := range many {
		many[i] = claims.Announcement{UUID: fmt.Sprint(i), Said: strings.Repeat("cd", 32)}
	}
	for _, tc := range []struct {
		name  string
		st    *markState // nil: never written
		fails bool
	}{
		{"its own", &markState{Execution: "x1", Vouched: v, Announced: many[:2]}, false},
		{"another execution's", &markState{Execution: "x2", Vouched: v}, true},
		{"no bytes", &markState{Execution: "x1"}, true},
		{"too many announcements", &markState{Execution: "x1", Vouched: v, Announced: many}, true},
		{"never written", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newMark()
			if err != nil {
				t.Fatal(err)
			}
			if tc.st != nil {
				if _, err := writeMark(f, 0, *tc.st); err != nil {
					t.Fatal(err)
				}
			}
			m := takeMark("x1", f)
			defer m.close()
			got, said := m.handed()
			if (m.err != nil) != tc.fails {
				t.Fatalf("err %v; want failed %v", m.err, tc.fails)
			}
			want, wantSaid := v, 2
			if tc.fails {
				want, wantSaid = fileState(nil), 0
			}
			if got == nil || *got != *want || len(said) != wantSaid {
				t.Fatalf("handed %+v with %d announcements; want %+v with %d", got, len(said), want, wantSaid)
			}
		})
	}
	if takeMark("x1", nil) != nil {
		t.Fatal("no mark kept read as one")
	}
}
