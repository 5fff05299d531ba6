package engine

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of a reduced line. An engine line longer than the in-memory
// framing bound is never held whole: it is read once, as a stream, into a
// copy with the same structure whose strings are cut (Clip says where).
const (
	// MaxLiveString bounds one string of a reduced line, in bytes of its
	// JSON form: the most of one text block a live event carries.
	MaxLiveString = 1 << 20
	// reduceBudget is the size of a reduced line past which every further
	// string is cut to maxKey bytes and every further array element
	// dropped.
	reduceBudget = 2 << 20
	// reduceHard is the size a reduced line may never pass: structure alone
	// (keys, numbers, empty strings) beyond it makes the line lost.
	reduceHard = reduceBudget + 1<<20
	// maxKey bounds an object key of a reduced line, and is what a string
	// keeps past the budget.
	maxKey = 1024
	// maxNumber bounds a JSON number's text.
	maxNumber = 64
	// maxDepth bounds nesting, so a hostile line cannot exhaust the stack.
	maxDepth = 512
	// maxClipPaths bounds the paths a Clip lists.
	maxClipPaths = 32
)

// ErrReduce is wrapped when an oversize line cannot be reduced: it is not
// one JSON value, or its structure alone passes the reduced bound.
var ErrReduce = errors.New("oversize engine line cannot be reduced")

// Clip says what was cut from an oversize line to keep it bounded.
type Clip struct {
	// Bytes is the length of the line as the engine wrote it.
	Bytes int64
	// Strings counts strings cut short.
	Strings int
	// Dropped counts array elements left out.
	Dropped int
	// Paths are JSON pointers (RFC 6901) of the cut strings and of the
	// arrays that lost elements, the first maxClipPaths of them.
	Paths []string
}

// Under reports whether anything at or below the JSON pointer prefix was
// cut. A nil Clip cut nothing.
func (c *Clip) Under(prefix string) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Paths {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	// Paths is bounded: past its bound, say yes rather than miss a cut.
	return len(c.Paths) >= maxClipPaths
}

// reducer copies one JSON value from r with bounded strings and size.
type reducer struct {
	r    *bufio.Reader
	out  []byte
	clip Clip
	path []string
}

// reduce reads one JSON value (and trailing white space) from r, which
// ends where the line ends, and returns its bounded copy.
func reduce(r io.Reader) ([]byte, *Clip, error) {
	z := &reducer{r: bufio.NewReaderSize(r, minRead), out: make([]byte, 0, 64<<10)}
	if err := z.value(false, 0); err != nil {
		return nil, nil, err
	}
	z.space()
	if _, err := z.r.ReadByte(); err != io.EOF {
		return nil, nil, fmt.Errorf("%w: more after the JSON value", ErrReduce)
	}
	return z.out, &z.clip, nil
}

func (z *reducer) fail(what string) error {
	return fmt.Errorf("%w: %s at %s", ErrReduce, what, z.pointer())
}

func (z *reducer) pointer() string {
	if len(z.path) == 0 {
		return "/"
	}
	return "/" + strings.Join(z.path, "/")
}

// cut records a cut at the current path.
func (z *reducer) cut() {
	if len(z.clip.Paths) < maxClipPaths {
		z.clip.Paths = append(z.clip.Paths, z.pointer())
	}
}

func (z *reducer) emit(discard bool, b ...byte) error {
	if discard {
		return nil
	}
	z.out = append(z.out, b...)
	if len(z.out) > reduceHard {
		return fmt.Errorf("%w: its reduced copy passes %d bytes at %s", ErrLineTooLong, reduceHard, z.pointer())
	}
	return nil
}

func (z *reducer) space() {
	for {
		b, err := z.r.ReadByte()
		if err != nil {
			return
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			z.r.UnreadByte()
			return
		}
	}
}

func (z *reducer) next() (byte, error) {
	b, err := z.r.ReadByte()
	if err != nil {
		return 0, z.fail("unexpected end of line")
	}
	return b, nil
}

// value copies one value; discard parses it without output.
func (z *reducer) value(discard bool, depth int) error {
	if depth > maxDepth {
		return z.fail("nesting too deep")
	}
	z.space()
	b, err := z.next()
	if err != nil {
		return err
	}
	switch {
	case b == '{':
		return z.object(discard, depth)
	case b == '[':
		return z.array(discard, depth)
	case b == '"':
		// Past the budget a string still keeps maxKey bytes: ids, types
		// and names stay whole wherever they come in the line (a
		// response's id may follow its data).
		limit := 0
		if !discard {
			limit = max(maxKey, min(MaxLiveString, reduceBudget-len(z.out)))
		}
		return z.str(discard, limit)
	case b == 't':
		return z.literal(discard, "true")
	case b == 'f':
		return z.literal(discard, "false")
	case b == 'n':
		return z.literal(discard, "null")
	case b == '-' || (b >= '0' && b <= '9'):
		return z.number(discard, b)
	}
	return z.fail(fmt.Sprintf("unexpected byte %q", b))
}

func (z *reducer) literal(discard bool, word string) error {
	for i := 1; i < len(word); i++ {
		if b, err := z.next(); err != nil || b != word[i] {
			return z.fail("bad literal")
		}
	}
	return z.emit(discard, []byte(word)...)
}

func (z *reducer) number(discard bool, first byte) error {
	num := []byte{first}
	for {
		b, err := z.r.ReadByte()
		if err != nil {
			break
		}
		if !(b >= '0' && b <= '9' || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-') {
			z.r.UnreadByte()
			break
		}
		if len(num) == maxNumber {
			return z.fail("number too long")
		}
		num = append(num, b)
	}
	return z.emit(discard, num...)
}

// str copies a string (its opening quote read) keeping at most limit
// bytes of its JSON form, cut only between whole escapes and whole UTF-8
// sequences, so the copy is as valid as the original.
func (z *reducer) str(discard bool, limit int) error {
	if err := z.emit(discard, '"'); err != nil {
		return err
	}
	kept, cut := 0, false
	var unit [6]byte
	for {
		if n := z.run(discard || cut); n > 0 {
			if !discard && !cut {
				buf, _ := z.r.Peek(n)
				m := min(n, limit-kept)
				if err := z.emit(false, buf[:m]...); err != nil {
					return err
				}
				kept += m
				cut = m < n
			}
			z.r.Discard(n)
			continue
		}
		b, err := z.next()
		if err != nil {
			return err
		}
		u := unit[:1]
		u[0] = b
		switch {
		case b == '"':
			if cut {
				z.clip.Strings++
				z.cut()
			}
			return z.emit(discard, '"')
		case b == '\\':
			e, err := z.next()
			if err != nil {
				return err
			}
			u = append(u, e)
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					h, err := z.next()
					if err != nil {
						return err
					}
					u = append(u, h)
				}
			default:
				return z.fail("bad escape")
			}
		case b < 0x20:
			return z.fail("control character in string")
		case b >= 0x80:
			// Keep a multi-byte sequence whole: its continuation bytes
			// follow the lead byte.
			for n := utf8Len(b) - 1; n > 0; n-- {
				c, err := z.r.ReadByte()
				if err != nil {
					break
				}
				if c&0xC0 != 0x80 {
					z.r.UnreadByte()
					break
				}
				u = append(u, c)
			}
		}
		if discard || cut {
			continue
		}
		if kept+len(u) > limit {
			cut = true
			continue
		}
		kept += len(u)
		if err := z.emit(false, u...); err != nil {
			return err
		}
	}
}

// run is the length of the plain run of string bytes at the head of the
// buffer: no quote, backslash or control byte, and (unless skipping, when
// sequence boundaries do not matter) ASCII only. Zero sends the caller to
// the byte-at-a-time path, which also refills the buffer.
func (z *reducer) run(skipping bool) int {
	buf, _ := z.r.Peek(z.r.Buffered())
	for n, c := range buf {
		if c == '"' || c == '\\' || c < 0x20 || (!skipping && c >= 0x80) {
			return n
		}
	}
	return len(buf)
}

func utf8Len(lead byte) int {
	switch {
	case lead&0xE0 == 0xC0:
		return 2
	case lead&0xF0 == 0xE0:
		return 3
	case lead&0xF8 == 0xF0:
		return 4
	}
	return 1
}

func (z *reducer) array(discard bool, depth int) error {
	if err := z.emit(discard, '['); err != nil {
		return err
	}
	z.space()
	if b, err := z.next(); err != nil {
		return err
	} else if b == ']' {
		return z.emit(discard, ']')
	}
	z.r.UnreadByte()
	kept, dropped := 0, 0
	for i := 0; ; i++ {
		drop := !discard && len(z.out) >= reduceBudget
		if !discard && !drop && kept > 0 {
			if err := z.emit(false, ','); err != nil {
				return err
			}
		}
		z.path = append(z.path, strconv.Itoa(i))
		err := z.value(discard || drop, depth+1)
		z.path = z.path[:len(z.path)-1]
		if err != nil {
			return err
		}
		if drop {
			dropped++
		} else {
			kept++
		}
		z.space()
		b, err := z.next()
		if err != nil {
			return err
		}
		if b == ']' {
			break
		}
		if b != ',' {
			return z.fail("want , or ] in array")
		}
	}
	if dropped > 0 {
		z.clip.Dropped += dropped
		z.cut()
	}
	return z.emit(discard, ']')
}

func (z *reducer) object(discard bool, depth int) error {
	if err := z.emit(discard, '{'); err != nil {
		return err
	}
	z.space()
	if b, err := z.next(); err != nil {
		return err
	} else if b == '}' {
		return z.emit(discard, '}')
	}
	z.r.UnreadByte()
	for first := true; ; first = false {
		if !first {
			if err := z.emit(discard, ','); err != nil {
				return err
			}
		}
		z.space()
		if b, err := z.next(); err != nil {
			return err
		} else if b != '"' {
			return z.fail("want a key")
		}
		start := len(z.out)
		if err := z.str(discard, maxKey); err != nil {
			return err
		}
		key := ""
		if !discard {
			key = pointerToken(z.out[start:])
		}
		z.space()
		if b, err := z.next(); err != nil {
			return err
		} else if b != ':' {
			return z.fail("want : after a key")
		}
		if err := z.emit(discard, ':'); err != nil {
			return err
		}
		z.path = append(z.path, key)
		err := z.value(discard, depth+1)
		z.path = z.path[:len(z.path)-1]
		if err != nil {
			return err
		}
		z.space()
		b, err := z.next()
		if err != nil {
			return err
		}
		if b == '}' {
			return z.emit(discard, '}')
		}
		if b != ',' {
			return z.fail("want , or } in object")
		}
	}
}

// pointerToken turns a copied key (with its quotes, still JSON-escaped)
// into an RFC 6901 reference token. Keys with escapes are rare in Pi's
// output; they are kept escaped, which only makes their path less exact.
func pointerToken(quoted []byte) string {
	k := string(quoted[1 : len(quoted)-1])
	if !utf8.ValidString(k) {
		k = strings.ToValidUTF8(k, "\uFFFD")
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}
