package audit

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/internal/inert"
)

// TestFieldsBounded: a 1 MiB peer string (a record type, a client name)
// reaches the journal as a short prefix in every field and the message.
func TestFieldsBounded(t *testing.T) {
	huge := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a rune
	l, s := newSent(t)
	l.Log(Entry{Event: Hello, Connection: huge, Refusal: huge, Message: "got type " + huge,
		Fields: map[string]string{"CLIENT": huge, "bad name": "x", "REQUEST": huge}})
	l.Log(Entry{Event: Proof, Message: "proof", Fields: map[string]string{"PROOF": strings.Repeat("x", MaxProof+1), "PROOF_DIGEST": "d"}})
	got := s.all()
	for _, e := range got {
		for k, v := range e {
			max := MaxField
			if k == "MESSAGE" {
				max = MaxMessage
			}
			if len(v) > max {
				t.Errorf("%s is %d bytes; want at most %d", k, len(v), max)
			}
			if !utf8.ValidString(v) {
				t.Errorf("%s was cut inside a rune", k)
			}
		}
	}
	if !strings.HasSuffix(got[0]["MOSAIC_CLIENT"], "…[cut from 1048576 bytes]") {
		t.Errorf("a cut field does not say so: %q", got[0]["MOSAIC_CLIENT"][len(got[0]["MOSAIC_CLIENT"])-40:])
	}
	if _, ok := got[0]["MOSAIC_bad name"]; ok {
		t.Error("a field name journald refuses was written")
	}
	if got[1]["MOSAIC_PROOF"] != "" || got[1]["MOSAIC_PROOF_OMITTED"] != "1048577" || got[1]["MOSAIC_PROOF_DIGEST"] != "d" {
		t.Errorf("an oversized proof: %v; want it left out, its size and digest kept", got[1])
	}
}

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 40), 30, strings.Repeat("a", 30-len("…[cut from 40 bytes]")) + "…[cut from 40 bytes]"},
		{strings.Repeat("a", 40), 5, "aaaaa"},
		{strings.Repeat("é", 20), 5, "éé"},
	} {
		if got := bound(tc.in, tc.max); got != tc.want {
			t.Errorf("bound(%d bytes, %d) = %q, want %q", len(tc.in), tc.max, got, tc.want)
		}
	}
}

// TestMessageIsOneLine: engine or peer text quoted in a message (an
// engine's stderr tail after its exit) cannot put lines of its own in
// the journal, reorder the line or hide text in it: every character of
// inert.Table is escaped (controls, separators, bidi, invisible and tag
// characters), plain text, ZWJ and ZWNJ are kept as they are.
func TestMessageIsOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, é and 中", "plain text, é and 中"},
		{"exited; stderr:\ntakeover: connection k-1 controls at generation 9", `exited; stderr:\ntakeover: connection k-1 controls at generation 9`},
		{"a\r\tb\x00c\x1b[31md\x7f", `a\r\tb\u{0000}c\u{001B}[31md\u{007F}`},
		{"\u0085nel \u2028ls \u202eevil\u2066", `\u{0085}nel \u{2028}ls \u{202E}evil\u{2066}`},
		{"r\u200bm -rf \ufeff\u2060x\u2064", `r\u{200B}m -rf \u{FEFF}\u{2060}x\u{2064}`},
		{"ok\U000E0001\U000E0069\U000E007F", `ok\u{E0001}\u{E0069}\u{E007F}`},
		{"zwj 👩\u200d💻, zwnj \u200c, nbsp \u00a0", "zwj 👩\u200d💻, zwnj \u200c, nbsp \u00a0"},
		{"csi \x9b31m, cut \xe2\x80, ok \ufffd", `csi \x9B31m, cut \xE2\x80, ok ` + "\ufffd"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			l, s := newSent(t)
			l.Log(Entry{Event: Transition, Message: tc.in})
			if got := s.all()[0]["MESSAGE"]; got != tc.want {
				t.Fatalf("MESSAGE %q; want %q", got, tc.want)
			}
		})
	}
}

// TestOneLineEscapesTable: the first and last character of every row of
// the shared table is escaped, so a row added there reaches the journal's
// notation too.
func TestOneLineEscapesTable(t *testing.T) {
	for _, e := range inert.Table {
		t.Run(e.Name, func(t *testing.T) {
			for _, r := range []rune{e.Lo, e.Hi} {
				got := OneLine("a" + string(r) + "b")
				if strings.ContainsRune(got, r) || !strings.HasPrefix(got, `a\`) {
					t.Errorf("%U: OneLine kept it: %q", r, got)
				}
			}
		})
	}
}
