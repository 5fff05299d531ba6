package terminal

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/internal/inert"
)

// raw reports whether s still holds something the terminal could
// interpret: an escaped rune or an invalid byte.
func raw(s string) string {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Sprintf("invalid byte %#x at %d", s[i], i)
		}
		if _, ok := Escape(r); ok {
			return fmt.Sprintf("%U at %d", r, i)
		}
		i += n
	}
	return ""
}

// TestEscapedTableEveryRune: every character of the shared table is shown
// in the terminal's notation, whatever row it came from.
func TestEscapedTableEveryRune(t *testing.T) {
	for _, e := range inert.Table {
		t.Run(e.Name, func(t *testing.T) {
			for r := e.Lo; r <= e.Hi; r++ {
				var want string
				switch {
				case e.Class == inert.DEL:
					want = "^?"
				case e.Class == inert.C0:
					want = "^" + string(r+'@')
				default:
					want = fmt.Sprintf("<U+%04X>", r)
				}
				got := SanitizeLine("a" + string(r) + "b")
				if got != "a"+want+"b" {
					t.Errorf("%U: got %q, want %q", r, got, "a"+want+"b")
				}
				if bad := raw(got); bad != "" {
					t.Errorf("%U: output still holds %s", r, bad)
				}
			}
		})
	}
}

func TestSanitizeClasses(t *testing.T) {
	cases := []struct {
		name, in, line string
		body           []string
	}{
		{"plain", "hello, world", "hello, world", []string{"hello, world"}},
		{"ESC sequence", "\x1b[2J\x1b]0;pwned\x07", "^[[2J^[]0;pwned^G", []string{"^[[2J^[]0;pwned^G"}},
		{"NUL", "a\x00b", "a^@b", []string{"a^@b"}},
		{"DEL", "a\x7fb", "a^?b", []string{"a^?b"}},
		{"LF in a line", "one\ntwo", "one^Jtwo", []string{"one", "two"}},
		{"CRLF in a body", "one\r\ntwo", "one^M^Jtwo", []string{"one^M", "two"}},
		{"TAB", "a\tb", "a^Ib", []string{"a^Ib"}},
		{"C1 CSI", "a\u009b2Jb", "a<U+009B>2Jb", []string{"a<U+009B>2Jb"}},
		{"C1 NEL", "a\u0085b", "a<U+0085>b", []string{"a<U+0085>b"}},
		{"LS PS", "a\u2028b\u2029c", "a<U+2028>b<U+2029>c", []string{"a<U+2028>b<U+2029>c"}},
		{"RLO spoof", "file\u202Etxt.exe", "file<U+202E>txt.exe", []string{"file<U+202E>txt.exe"}},
		{"bidi isolates", "\u2066x\u2069\u2067\u2068", "<U+2066>x<U+2069><U+2067><U+2068>", nil},
		{"ALM LRM RLM", "\u061c\u200e\u200f", "<U+061C><U+200E><U+200F>", nil},
		{"ZWSP BOM WJ", "a\u200bb\ufeffc\u2060d\u2064", "a<U+200B>b<U+FEFF>c<U+2060>d<U+2064>", nil},
		{"tags", "\U000E0001\U000E0041\U000E007F", "<U+E0001><U+E0041><U+E007F>", nil},
		{"ZWJ emoji passes", "👩\u200d💻", "👩\u200d💻", nil},
		{"ZWNJ passes", "می\u200cخواهم", "می\u200cخواهم", nil},
		{"combining passes", "e\u0301", "e\u0301", nil},
		{"RTL text passes", "שלום عربي", "שלום عربي", nil},
		{"invalid bytes", "a\xffb\xc3", "a<0xFF>b<0xC3>", nil},
		{"lone continuation", "\x80\xbf", "<0x80><0xBF>", nil},
		{"overlong", "\xc0\xaf", "<0xC0><0xAF>", nil},
		{"surrogate half", "\xed\xa0\x80", "<0xED><0xA0><0x80>", nil},
		{"raw C1 byte", "\x9b", "<0x9B>", nil},
		{"caret stays literal", "^[ <U+202E>", "^[ <U+202E>", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SanitizeLine(c.in); got != c.line {
				t.Errorf("SanitizeLine(%q) = %q, want %q", c.in, got, c.line)
			}
			body := SanitizeBody(c.in)
			if c.body != nil && strings.Join(body, "|") != strings.Join(c.body, "|") {
				t.Errorf("SanitizeBody(%q) = %q, want %q", c.in, body, c.body)
			}
			for _, l := range append(body, SanitizeLine(c.in)) {
				if bad := raw(l); bad != "" {
					t.Errorf("output %q still holds %s", l, bad)
				}
			}
		})
	}
}

func TestWrapKeepsNotationsAndWidth(t *testing.T) {
	in := "aaaa\u202Ebbbb cccc dddd\x1b[31m 漢字漢字漢字"
	for w := 1; w <= 30; w++ {
		lines := wrapLine(in, w)
		if got := strings.Join(lines, ""); got != SanitizeLine(in) {
			t.Fatalf("width %d: joined %q, want %q", w, got, SanitizeLine(in))
		}
		for _, l := range lines {
			if w >= 2 && Width(l) > w {
				t.Errorf("width %d: line %q is %d cells", w, l, Width(l))
			}
			if w >= 8 && strings.Contains(l, "<U+202") && !strings.Contains(l, "<U+202E>") {
				t.Errorf("width %d: notation split in %q", w, l)
			}
		}
	}
	if got := wrapLine("hello world again", 11); strings.Join(got, "|") != "hello |world again" {
		t.Errorf("word wrap: %q", got)
	}
}

func TestClip(t *testing.T) {
	if got := clip("abc\ndef", 0); got != "abc^Jdef" {
		t.Errorf("clip no width: %q", got)
	}
	if got := clip("abcdefgh", 5); got != "abcd…" {
		t.Errorf("clip: %q", got)
	}
	if got := clip("ab\u202Ecdef", 8); got != "ab…" {
		t.Errorf("clip keeps notation whole: %q", got)
	}
}
