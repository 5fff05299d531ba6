package terminal

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// feedChunks feeds chunks to a fresh parser, then flushes.
func feedChunks(chunks [][]byte) []Key {
	var p Parser
	var out []Key
	for _, c := range chunks {
		out = append(out, p.Feed(c)...)
	}
	return normalize(append(out, p.Flush()...))
}

// normalize joins adjacent text keys of the same kind: where a read
// boundary falls may split typed or pasted text, never change it.
func normalize(ks []Key) []Key {
	var out []Key
	for _, k := range ks {
		out = emit(out, k)
	}
	return out
}

// splits calls f with in cut into chunks at every combination of byte
// boundaries when in is short, and otherwise at every single boundary,
// every pair of boundaries and one byte at a time.
func splits(in []byte, f func(chunks [][]byte)) {
	n := len(in)
	if n <= 14 {
		for mask := 0; mask < 1<<max(n-1, 0); mask++ {
			var chunks [][]byte
			start := 0
			for i := 1; i < n; i++ {
				if mask&(1<<(i-1)) != 0 {
					chunks = append(chunks, in[start:i])
					start = i
				}
			}
			f(append(chunks, in[start:]))
		}
		return
	}
	for i := 0; i <= n; i++ {
		for j := i; j <= n; j++ {
			f([][]byte{in[:i], in[i:j], in[j:]})
		}
	}
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	f(bytewise)
}

func show(ks []Key) string {
	var b strings.Builder
	for _, k := range ks {
		if k.Text != "" {
			fmt.Fprintf(&b, "%s(%q) ", k.Kind, k.Text)
		} else {
			fmt.Fprintf(&b, "%s ", k.Kind)
		}
	}
	return b.String()
}

func TestParserEverySplit(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Key
	}{
		{"typed text and enter", "hi\rnext", []Key{{KeyText, "hi"}, {Kind: KeyEnter}, {KeyText, "next"}}},
		{"multi-byte UTF-8", "é漢👩\u200d💻", []Key{{KeyText, "é漢👩\u200d💻"}}},
		{"Ctrl-J and Alt-Enter are newlines", "a\nb\x1b\rc", []Key{{KeyText, "a"}, {Kind: KeyNewline}, {KeyText, "b"}, {Kind: KeyNewline}, {KeyText, "c"}}},
		{"control keys", "\x14\x07\x0f\x03\x04", []Key{{Kind: KeyTakeControl}, {Kind: KeyInterrupt}, {Kind: KeyReconnect}, {Kind: KeyQuit}, {Kind: KeyQuit}}},
		{"backspace", "ab\x7f\x08", []Key{{KeyText, "ab"}, {Kind: KeyBackspace}, {Kind: KeyBackspace}}},
		{"pages and arrows", "\x1b[5~\x1b[6~\x1b[A\x1b[B\x1b[C\x1b[D\x1bOA\x1bOD", []Key{{Kind: KeyPageUp}, {Kind: KeyPageDown}, {Kind: KeyUp}, {Kind: KeyDown}, {Kind: KeyRight}, {Kind: KeyLeft}, {Kind: KeyUp}, {Kind: KeyLeft}}},
		{"tab is text", "a\tb", []Key{{KeyText, "a\tb"}}},
		{"unknown sequence", "\x1b[1;5Hx", []Key{{KeyUnknown, "\x1b[1;5H"}, {KeyText, "x"}}},
		{"alt-x", "\x1bx", []Key{{KeyUnknown, "\x1bx"}}},
		{"escape escape", "\x1b\x1b[A", []Key{{Kind: KeyEscape}, {Kind: KeyUp}}},
		{"lone trailing ESC", "a\x1b", []Key{{KeyText, "a"}, {Kind: KeyEscape}}},
		{"invalid byte typed", "a\xffb", []Key{{KeyText, "a\uFFFDb"}}},
		{"paste with newline, CR and controls", "\x1b[200~line1\nline2\r\x03\x14\x1b[A\x1b\x1b[20\x1b[201~",
			[]Key{{KeyPaste, "line1\nline2\r\x03\x14\x1b[A\x1b\x1b[20"}}},
		{"paste then enter", "\x1b[200~/goal x\r\x1b[201~\r", []Key{{KeyPaste, "/goal x\r"}, {Kind: KeyEnter}}},
		{"paste of UTF-8 and LS", "\x1b[200~é\u2028漢\x1b[201~", []Key{{KeyPaste, "é\u2028漢"}}},
		{"paste holds a start marker", "\x1b[200~a\x1b[200~b\x1b[201~", []Key{{KeyPaste, "a\x1b[200~b"}}},
		{"empty paste", "x\x1b[200~\x1b[201~y", []Key{{KeyText, "xy"}}},
		{"stray paste end", "\x1b[201~a", []Key{{KeyUnknown, "\x1b[201~"}, {KeyText, "a"}}},
		{"broken CSI", "\x1b[12\rz", []Key{{KeyUnknown, "\x1b[12"}, {Kind: KeyEnter}, {KeyText, "z"}}},
		{"enter splits messages in one chunk", "one\rtwo\rthree", []Key{{KeyText, "one"}, {Kind: KeyEnter}, {KeyText, "two"}, {Kind: KeyEnter}, {KeyText, "three"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			count := 0
			splits([]byte(c.in), func(chunks [][]byte) {
				count++
				got := feedChunks(chunks)
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("chunks %q:\n got %s\nwant %s", chunks, show(got), show(c.want))
				}
			})
			if count == 0 {
				t.Fatal("no splits tried")
			}
		})
	}
}

// A long paste (beyond the exhaustive length) keeps its markers at every
// pair of cut points, so its newlines never become Enter.
func TestParserLongPasteSplitMarkers(t *testing.T) {
	content := "first line\nsecond \x1b[201 line\r/slash\x1b\u2028end"
	in := "typed\x1b[200~" + content + "\x1b[201~\r"
	want := []Key{{KeyText, "typed"}, {KeyPaste, content}, {Kind: KeyEnter}}
	splits([]byte(in), func(chunks [][]byte) {
		if got := feedChunks(chunks); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks %q:\n got %s\nwant %s", chunks, show(got), show(want))
		}
	})
}

func TestParserWaitsAndFlushes(t *testing.T) {
	var p Parser
	if ks := p.Feed([]byte("\x1b")); len(ks) != 0 || !p.Pending() {
		t.Fatalf("lone ESC: keys %s pending %v", show(ks), p.Pending())
	}
	if ks := p.Feed([]byte("[200~")); len(ks) != 0 || !p.InPaste() {
		t.Fatalf("paste start after ESC: keys %s in paste %v", show(ks), p.InPaste())
	}
	p.Feed([]byte("x\x1b"))
	if ks := p.Flush(); ks != nil || !p.InPaste() {
		t.Fatalf("Flush inside a paste must do nothing: %s", show(ks))
	}
	ks := p.Feed([]byte("[201~\r"))
	if want := []Key{{Kind: KeyEnter}}; !reflect.DeepEqual(ks, want) || p.InPaste() {
		t.Fatalf("after paste end: %s", show(ks))
	}
	p.Feed([]byte("\xe6\xbc"))
	if !p.Pending() {
		t.Fatal("partial UTF-8 not pending")
	}
	if ks := p.Flush(); !reflect.DeepEqual(ks, []Key{{KeyText, "\uFFFD\uFFFD"}}) {
		t.Fatalf("flush partial UTF-8: %s", show(ks))
	}
	p.Feed([]byte("\x1b[1"))
	if ks := p.Flush(); !reflect.DeepEqual(ks, []Key{{KeyUnknown, "\x1b[1"}}) || p.Pending() {
		t.Fatalf("flush partial CSI: %s", show(ks))
	}
	ks = append(p.Feed([]byte("\x1b["+strings.Repeat("1", 40))), p.Flush()...)
	if len(ks) != 2 || ks[0].Kind != KeyUnknown || len(ks[0].Text) != maxSeq || ks[1] != (Key{KeyText, strings.Repeat("1", 10)}) {
		t.Fatalf("overlong CSI: %s", show(ks))
	}
}

func FuzzParser(f *testing.F) {
	for _, s := range []string{"hi\r", "\x1b[200~a\nb\x1b[201~\r", "\x1b\r", "\x1b[5~", "é\xff", "\x1b[", "\x1bO"} {
		f.Add([]byte(s), uint8(1), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		whole := feedChunks([][]byte{in})
		i, j := int(a)%(len(in)+1), int(b)%(len(in)+1)
		if i > j {
			i, j = j, i
		}
		if got := feedChunks([][]byte{in[:i], in[i:j], in[j:]}); !reflect.DeepEqual(got, whole) {
			t.Fatalf("split %d,%d of %q:\n got %s\nwhole %s", i, j, in, show(got), show(whole))
		}
		// Paste content round-trips: everything between the markers is
		// one paste, whatever it holds, as long as it holds no end marker.
		content := strings.ReplaceAll(string(in), string(pasteEnd), "")
		for strings.Contains(content, string(pasteEnd)) {
			content = strings.ReplaceAll(content, string(pasteEnd), "")
		}
		pasted := []byte(string(pasteStart) + content + string(pasteEnd))
		k := len(pasteStart) + int(a)%(len(content)+1)
		got := feedChunks([][]byte{pasted[:k], pasted[k:]})
		var want []Key
		if content != "" {
			want = []Key{{KeyPaste, content}}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("paste of %q split at %d: %s", content, k, show(got))
		}
	})
}

// A large unbracketed or bracketed paste costs linear time: one key per
// run, not one per character.
func TestParserLargeInputIsOneKey(t *testing.T) {
	big := strings.Repeat("0123456789abcdé", 1<<16)
	var p Parser
	ks := p.Feed([]byte(big))
	if len(ks) != 1 || ks[0].Text != big {
		t.Fatalf("unbracketed: %d keys", len(ks))
	}
	ks = p.Feed([]byte("\x1b[200~" + big + "\x1b[201~"))
	if len(ks) != 1 || ks[0].Kind != KeyPaste || ks[0].Text != big {
		t.Fatalf("bracketed: %d keys", len(ks))
	}
}
