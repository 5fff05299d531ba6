package terminal

import (
	"bytes"
	"unicode/utf8"
)

// KeyKind says what a Key does.
type KeyKind int

// The keys the parser produces.
const (
	// KeyText is typed text (printable characters and TAB); Text holds it.
	KeyText KeyKind = iota + 1
	// KeyPaste is bracketed-paste content, literal bytes (newlines and
	// control characters included); Text holds it. A paste never submits.
	KeyPaste
	// KeyEnter (CR) submits the composer.
	KeyEnter
	// KeyNewline (Ctrl-J, Alt-Enter) adds a newline to the composer.
	KeyNewline
	// KeyTakeControl is Ctrl-T.
	KeyTakeControl
	// KeyInterrupt is Ctrl-G.
	KeyInterrupt
	// KeyReconnect is Ctrl-O: reconnect if needed and re-read the page.
	KeyReconnect
	// KeyQuit is Ctrl-C or Ctrl-D.
	KeyQuit
	// KeyPageUp and KeyPageDown scroll the transcript.
	KeyPageUp
	KeyPageDown
	// KeyBackspace is DEL or ^H.
	KeyBackspace
	// Arrow keys (CSI or SS3 form).
	KeyUp
	KeyDown
	KeyRight
	KeyLeft
	// KeyEscape is a lone ESC, produced only by Flush after a timeout or
	// when ESC is followed by a byte that cannot continue a sequence.
	KeyEscape
	// KeyUnknown is any other control byte, Alt-combination or escape
	// sequence; Text holds its raw bytes. The composer ignores it.
	KeyUnknown
	// KeyForceStop is Ctrl-X: ask for a confirmed force stop.
	KeyForceStop
	// KeyRecover is Ctrl-R: ask for a confirmed recovery and launch.
	KeyRecover
	// KeyRestoreDraft is Ctrl-Y: put back the text a control change
	// cleared from the composer.
	KeyRestoreDraft
	// KeyResumeQueue is Ctrl-P: resume a paused queue.
	KeyResumeQueue
)

var keyNames = map[KeyKind]string{
	KeyText: "text", KeyPaste: "paste", KeyEnter: "enter", KeyNewline: "newline",
	KeyTakeControl: "take-control", KeyInterrupt: "interrupt", KeyReconnect: "reconnect",
	KeyQuit: "quit", KeyPageUp: "page-up", KeyPageDown: "page-down",
	KeyBackspace: "backspace", KeyUp: "up", KeyDown: "down", KeyRight: "right",
	KeyLeft: "left", KeyEscape: "escape", KeyUnknown: "unknown",
	KeyForceStop: "force-stop", KeyRecover: "recover", KeyRestoreDraft: "restore-draft",
	KeyResumeQueue: "resume-queue",
}

func (k KeyKind) String() string {
	if s, ok := keyNames[k]; ok {
		return s
	}
	return "invalid"
}

// Key is one input event.
type Key struct {
	Kind KeyKind
	// Text is set for KeyText, KeyPaste and KeyUnknown.
	Text string
}

// Bracketed paste markers (xterm mode 2004).
var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// maxSeq bounds an escape sequence: a CSI without a final byte within it
// is reported as KeyUnknown rather than held forever.
const maxSeq = 32

// Parser turns raw terminal bytes, split across reads at any byte, into
// keys. The keys it produces do not depend on where the input was split,
// except that adjacent KeyText (or KeyPaste) keys may be split
// differently (their concatenation is the same), and except for what
// Flush does with a sequence that was incomplete when it was called.
//
// The zero value is ready to use. A Parser is not safe for concurrent use.
type Parser struct {
	buf   []byte
	paste bool
}

// Pending reports whether bytes are held waiting for the next read (a
// lone trailing ESC, an incomplete escape sequence or an incomplete UTF-8
// character) outside a paste. The screen loop calls Flush when nothing
// more arrives within its escape timeout.
func (p *Parser) Pending() bool { return !p.paste && len(p.buf) > 0 }

// InPaste reports whether the parser is inside a bracketed paste (its end
// marker not yet seen). Inside a paste every byte is text.
func (p *Parser) InPaste() bool { return p.paste }

// Feed parses the next chunk of input and returns the keys it completes.
func (p *Parser) Feed(b []byte) []Key {
	p.buf = append(p.buf, b...)
	var out []Key
	out, p.buf = p.parse(out, p.buf, false)
	if len(p.buf) == 0 {
		p.buf = nil
	}
	return out
}

// Flush ends what is pending after the caller's escape timeout: a lone
// ESC becomes KeyEscape, an incomplete escape sequence KeyUnknown, and an
// incomplete UTF-8 character U+FFFD per byte. Inside a paste it does
// nothing: a paste ends only at its end marker, even one split across
// reads right after its ESC.
func (p *Parser) Flush() []Key {
	if p.paste {
		return nil
	}
	var out []Key
	out, p.buf = p.parse(out, p.buf, true)
	p.buf = nil
	return out
}

func (p *Parser) parse(out []Key, buf []byte, final bool) ([]Key, []byte) {
	for len(buf) > 0 {
		if p.paste {
			i := bytes.IndexByte(buf, 0x1b)
			switch {
			case i < 0:
				return emit(out, Key{KeyPaste, string(buf)}), nil
			case i > 0:
				out = emit(out, Key{KeyPaste, string(buf[:i])})
				buf = buf[i:]
				continue
			case bytes.HasPrefix(buf, pasteEnd):
				p.paste = false
				buf = buf[len(pasteEnd):]
				continue
			case len(buf) < len(pasteEnd) && bytes.HasPrefix(pasteEnd, buf):
				return out, buf // the end marker may be split here: wait
			default:
				out = emit(out, Key{KeyPaste, "\x1b"})
				buf = buf[1:]
				continue
			}
		}
		k, n, ok := next(buf)
		if !ok {
			if !final {
				return out, buf
			}
			k, n = forced(buf)
		}
		buf = buf[n:]
		if k.Kind == 0 { // paste start
			p.paste = true
			continue
		}
		out = emit(out, k)
	}
	return out, buf
}

// emit appends k, joining it to a previous key of the same text kind.
func emit(out []Key, k Key) []Key {
	if n := len(out); n > 0 && (k.Kind == KeyText || k.Kind == KeyPaste) && out[n-1].Kind == k.Kind {
		out[n-1].Text += k.Text
		return out
	}
	return append(out, k)
}

var controls = map[byte]KeyKind{
	'\r': KeyEnter, '\n': KeyNewline, 0x14: KeyTakeControl, 0x07: KeyInterrupt,
	0x0F: KeyReconnect, 0x03: KeyQuit, 0x04: KeyQuit, 0x7F: KeyBackspace, 0x08: KeyBackspace,
	0x18: KeyForceStop, 0x12: KeyRecover, 0x19: KeyRestoreDraft, 0x10: KeyResumeQueue,
}

var sequences = map[string]KeyKind{
	"\x1b[5~": KeyPageUp, "\x1b[6~": KeyPageDown,
	"\x1b[A": KeyUp, "\x1b[B": KeyDown, "\x1b[C": KeyRight, "\x1b[D": KeyLeft,
	"\x1bOA": KeyUp, "\x1bOB": KeyDown, "\x1bOC": KeyRight, "\x1bOD": KeyLeft,
}

// next parses one key from the start of b. ok is false when b is a
// proper prefix of something longer (wait for more input). A zero Kind
// means the paste start marker.
func next(b []byte) (k Key, n int, ok bool) {
	c := b[0]
	switch {
	case c == 0x1b:
		return escape(b)
	case c < 0x20 && c != '\t' || c == 0x7F:
		if kind, found := controls[c]; found {
			return Key{Kind: kind}, 1, true
		}
		return Key{KeyUnknown, string(b[:1])}, 1, true
	}
	return textRun(b)
}

// textRun takes the run of printable characters at the start of b in one
// key (so a long unbracketed paste costs linear time). An incomplete
// UTF-8 character ends the run; alone, it waits for more input.
func textRun(b []byte) (Key, int, bool) {
	var s []byte
	i := 0
	for i < len(b) {
		c := b[i]
		if c < 0x20 && c != '\t' || c == 0x7F {
			break
		}
		if c < utf8.RuneSelf {
			s = append(s, c)
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			s = append(s, "\uFFFD"...)
		} else {
			s = append(s, b[i:i+size]...)
		}
		i += size
	}
	if i == 0 {
		return Key{}, 0, false
	}
	return Key{KeyText, string(s)}, i, true
}

func escape(b []byte) (Key, int, bool) {
	if len(b) < 2 {
		return Key{}, 0, false
	}
	switch c := b[1]; {
	case c == '[':
		for i := 2; i < len(b); i++ {
			if i >= maxSeq {
				return Key{KeyUnknown, string(b[:i])}, i, true
			}
			switch d := b[i]; {
			case d >= 0x40 && d <= 0x7E:
				seq := string(b[:i+1])
				if seq == string(pasteStart) {
					return Key{}, i + 1, true
				}
				if kind, found := sequences[seq]; found {
					return Key{Kind: kind}, i + 1, true
				}
				return Key{KeyUnknown, seq}, i + 1, true
			case d < 0x20 || d > 0x7E:
				// Not a CSI byte: the sequence is broken here and
				// this byte is parsed on its own.
				return Key{KeyUnknown, string(b[:i])}, i, true
			}
		}
		return Key{}, 0, false
	case c == 'O':
		if len(b) < 3 {
			return Key{}, 0, false
		}
		if kind, found := sequences[string(b[:3])]; found {
			return Key{Kind: kind}, 3, true
		}
		return Key{KeyUnknown, string(b[:2])}, 2, true
	case c == '\r' || c == '\n':
		return Key{Kind: KeyNewline}, 2, true // Alt-Enter
	case c == 0x1b || c >= 0x80:
		return Key{Kind: KeyEscape}, 1, true
	default:
		return Key{KeyUnknown, string(b[:2])}, 2, true // Alt-<key>
	}
}

// forced ends an incomplete start of b at Flush.
func forced(b []byte) (Key, int) {
	if b[0] != 0x1b {
		return Key{KeyText, "\uFFFD"}, 1 // incomplete UTF-8, one byte at a time
	}
	if len(b) == 1 {
		return Key{Kind: KeyEscape}, 1
	}
	return Key{KeyUnknown, string(b)}, len(b)
}
