package inert

import (
	"fmt"
	"testing"
	"unicode"
)

// TestOf probes each row's edges and the characters beside them that
// must pass (ZWNJ, ZWJ, NBSP, the narrow NBSP after the overrides), from
// a list written out here rather than read from Table, so a row dropped
// or narrowed there fails.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		r    rune
		want Class
	}{
		{0x0000, C0}, {'\n', C0}, {0x1B, C0}, {0x001F, C0}, {' ', Verbatim},
		{'a', Verbatim}, {0x007E, Verbatim}, {0x007F, DEL},
		{0x0080, C1}, {0x0085, C1}, {0x009B, C1}, {0x009F, C1}, {0x00A0, Verbatim}, {'é', Verbatim},
		{0x061B, Verbatim}, {0x061C, Bidi}, {0x061D, Verbatim},
		{0x200A, Verbatim}, {0x200B, Invisible}, {0x200C, Verbatim}, {0x200D, Verbatim},
		{0x200E, Bidi}, {0x200F, Bidi}, {0x2010, Verbatim},
		{0x2027, Verbatim}, {0x2028, Separator}, {0x2029, Separator},
		{0x202A, Bidi}, {0x202E, Bidi}, {0x202F, Verbatim},
		{0x205F, Verbatim}, {0x2060, Invisible}, {0x2064, Invisible}, {0x2065, Verbatim},
		{0x2066, Bidi}, {0x2069, Bidi}, {0x206A, Verbatim},
		{'漢', Verbatim}, {0xFEFE, Verbatim}, {0xFEFF, Invisible}, {0xFF00, Verbatim},
		{'😀', Verbatim}, {0xDFFFF, Verbatim}, {0xE0000, Tag}, {0xE0041, Tag}, {0xE007F, Tag}, {0xE0080, Verbatim},
		{unicode.MaxRune, Verbatim}, {-1, Verbatim}, {unicode.MaxRune + 1, Verbatim},
	} {
		t.Run(fmt.Sprintf("%U", tc.r), func(t *testing.T) {
			if got := Of(tc.r); got != tc.want {
				t.Errorf("Of(%U) = %d, want %d", tc.r, got, tc.want)
			}
			if got := Escaped(tc.r); got != (tc.want != Verbatim) {
				t.Errorf("Escaped(%U) = %v", tc.r, got)
			}
		})
	}
}

// TestTableShape: Of stops at the first row above r, so the rows must be
// sorted and disjoint; each has a class and a name for the readers'
// tests to report.
func TestTableShape(t *testing.T) {
	for i, e := range Table {
		t.Run(e.Name, func(t *testing.T) {
			if e.Lo > e.Hi || e.Class == Verbatim || e.Name == "" {
				t.Errorf("row %d %U-%U class %d name %q", i, e.Lo, e.Hi, e.Class, e.Name)
			}
			if i > 0 && e.Lo <= Table[i-1].Hi {
				t.Errorf("row %d starts at %U, not after row %d's end %U", i, e.Lo, i-1, Table[i-1].Hi)
			}
		})
	}
}

// TestOfEveryRune: the ASCII array and the early stop of the scan answer
// what a plain scan of Table does, for every rune.
func TestOfEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := Verbatim
		for _, e := range Table {
			if r >= e.Lo && r <= e.Hi {
				want = e.Class
			}
		}
		if got := Of(r); got != want {
			t.Fatalf("Of(%U) = %d, want %d", r, got, want)
		}
	}
}
