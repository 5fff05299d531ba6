package controller

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// Bounds of an engine's stderr as the controller keeps and forwards it.
// The engine (and anything it runs that inherits its stderr) can write as
// fast as it likes: the controller keeps only a short tail for the binding
// and forwards to its own stderr (the journal, under systemd) at most
// stderrRate bytes and stderrLines lines per stderrWindow, saying how much
// it dropped. Lines are bounded as well as bytes since each is a journal
// entry: 16 KiB of empty lines was 16,384 entries a second, and journald
// limits entries per unit, user@UID.service for every user unit at once,
// so the engine could make journald suppress the user's entries (and
// `mosaicctl audit` report them lost) at will. 50 a second is 1,500 in
// journald's 30 s window, against its burst of 10,000.
const (
	tailLines    = 20
	tailBytes    = 4 << 10
	maxLineKept  = 512 // one kept or forwarded line, cut on a rune boundary
	stderrRate   = 16 << 10
	stderrLines  = 50
	stderrWindow = time.Second
	// stderrDrain bounds how long an exit waits for the rest of stderr:
	// a descendant holding the pipe open must not hold up the exit report.
	stderrDrain = 500 * time.Millisecond
)

// stderrTail reads one execution's stderr: it keeps the last lines and
// forwards every line, within the rate, to out with the execution named.
type stderrTail struct {
	exec string
	out  io.Writer
	now  func() time.Time

	mu           sync.Mutex
	lines        []string // the last tailLines lines, each at most maxLineKept bytes
	cut          bool     // earlier lines were let go
	window       time.Time
	sent         int   // bytes forwarded in the current window
	sentLines    int   // lines forwarded in the current window
	dropped      int64 // bytes not forwarded since the last drop notice
	droppedLines int64 // lines not forwarded since the last drop notice
	done         chan struct{}
}

func newStderrTail(exec string, out io.Writer) *stderrTail {
	return &stderrTail{exec: exec, out: out, now: time.Now, done: make(chan struct{})}
}

// run reads r to its end. Lines longer than maxLineKept are cut (the rest
// up to the LF is counted as dropped), so neither a long line nor a flood
// grows memory.
func (s *stderrTail) run(r io.Reader) {
	defer close(s.done)
	buf := make([]byte, 32<<10)
	var line []byte
	long := 0 // bytes of the current line beyond maxLineKept
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			chunk := data
			if i >= 0 {
				chunk = data[:i]
			}
			room := maxLineKept - len(line)
			if room > len(chunk) {
				room = len(chunk)
			}
			line = append(line, chunk[:room]...)
			long += len(chunk) - room
			if i < 0 {
				break
			}
			s.line(line, long)
			line, long = line[:0], 0
			data = data[i+1:]
		}
		if err != nil {
			if len(line) > 0 || long > 0 {
				s.line(line, long)
			}
			s.flush()
			return
		}
	}
}

// line keeps and forwards one line; long counts bytes cut from it.
func (s *stderrTail) line(b []byte, long int) {
	// A cut may split a rune: that shows as U+FFFD, never as bad UTF-8.
	text := strings.ToValidUTF8(strings.TrimSuffix(string(b), "\r"), "\uFFFD")
	if long > 0 {
		text += fmt.Sprintf(" [%d more bytes]", long)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, text)
	for len(s.lines) > tailLines || (len(s.lines) > 1 && s.sizeLocked() > tailBytes) {
		s.lines = s.lines[1:]
		s.cut = true
	}
	s.forwardLocked(text, len(b)+long+1)
}

func (s *stderrTail) sizeLocked() int {
	n := 0
	for _, l := range s.lines {
		n += len(l) + 1
	}
	return n
}

// forwardLocked writes one line to out within the rate; size is what the
// engine wrote for it.
func (s *stderrTail) forwardLocked(text string, size int) {
	// Escaped in the journal's notation: journald's stream reader ends an
	// entry at NUL as at LF (systemd 252 and later), so a NUL passed
	// through made one line up to 256 entries, past the bound above, and
	// the text after it an entry without this prefix: a line the
	// controller's to `journalctl -o cat`. Other controls would rewrite
	// the terminal that shows it. The tail stays as written: it reaches
	// clients, which escape it in their own notation, and the journal
	// through audit, which escapes it there.
	text = audit.OneLine(text)
	// The rate holds what reaches the journal: an escape is up to eight
	// times the byte it stands for. The drop notice counts the engine's.
	cost := max(size, len(text)+1)
	now := s.now()
	if now.Sub(s.window) >= stderrWindow {
		s.noticeLocked()
		s.window, s.sent, s.sentLines = now, 0, 0
	}
	if s.sent+cost > stderrRate || s.sentLines >= stderrLines {
		s.dropped += int64(size)
		s.droppedLines++
		return
	}
	s.sent += cost
	s.sentLines++
	fmt.Fprintf(s.out, "engine %s: %s\n", s.exec, text)
}

// noticeLocked says how much was dropped since the last notice.
func (s *stderrTail) noticeLocked() {
	if s.droppedLines > 0 {
		fmt.Fprintf(s.out, "engine %s: %d bytes of engine stderr dropped, %d lines (over %d bytes or %d lines per %s)\n",
			s.exec, s.dropped, s.droppedLines, stderrRate, stderrLines, stderrWindow)
		s.dropped, s.droppedLines = 0, 0
	}
}

func (s *stderrTail) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noticeLocked()
}

// tail returns the kept lines and whether earlier ones were let go. After
// the engine exited it first waits, briefly, for the pipe to end.
func (s *stderrTail) tail(wait bool) ([]string, bool) {
	if wait {
		select {
		case <-s.done:
		case <-time.After(stderrDrain):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...), s.cut
}

// readStderr starts keeping the tail of a launched engine's stderr; nil
// when the launcher did not give the controller the pipe.
func (c *Controller) readStderr(exec string, h *scopes.Handle) *stderrTail {
	if h == nil || h.Stderr == nil {
		return nil
	}
	out := c.cfg.EngineStderr
	if out == nil {
		out = os.Stderr
	}
	s := newStderrTail(exec, out)
	go func() {
		defer h.Stderr.Close()
		s.run(h.Stderr)
	}()
	return s
}

// exitWait bounds how long a failed load check waits for an engine whose
// output ended to be reaped, so its exit status can be reported.
const exitWait = 2 * time.Second

// engineEnd reports how x ended, or why it failed its load check
// (preflight, "" for an exit): its exit status once known and the tail of
// its stderr. Not under mu: it may wait for the pipe (stderrDrain) and,
// after a failed load check, for the exit (exitWait).
func (c *Controller) engineEnd(x *execution, preflight string) *protocol.EngineEnd {
	end := &protocol.EngineEnd{Execution: x.id, Preflight: preflight}
	exited := false
	if x.handle != nil {
		if preflight != "" && x.conn != nil {
			select {
			case <-x.conn.Done(): // stdout ended: the exit is near
				select {
				case <-x.handle.Done():
				case <-time.After(exitWait):
				}
			default:
			}
		}
		select {
		case <-x.handle.Done():
			exited = true
			end.Status = exitStatus(x.handle.ExitErr())
		default:
		}
	}
	if x.stderr != nil {
		end.Stderr, end.StderrCut = x.stderr.tail(exited)
	}
	return end
}

// exitStatus renders an exit as the kernel reported it.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// endSummary is the journal's rendering of an engine end: status and the
// stderr tail, one line each after the message.
func endSummary(end *protocol.EngineEnd) string {
	if end == nil || len(end.Stderr) == 0 {
		return ""
	}
	cut := ""
	if end.StderrCut {
		cut = ", earlier lines not kept"
	}
	return fmt.Sprintf("; last %d lines of its stderr%s:\n%s", len(end.Stderr), cut, strings.Join(end.Stderr, "\n"))
}

// endFields adds the engine end's journal fields to fields.
func endFields(end *protocol.EngineEnd, fields map[string]string) map[string]string {
	if end == nil {
		return fields
	}
	if end.Status != "" {
		fields["EXIT_STATUS"] = end.Status
	}
	if len(end.Stderr) > 0 {
		fields["ENGINE_STDERR"] = strings.Join(end.Stderr, "\n")
	}
	return fields
}
