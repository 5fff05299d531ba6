package controller

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// TestHandOverAnnouncements: what one Claude connection announced, as a
// claim records it at a restart (handOver), is announced by the next
// controller's connection once it takes it over (takeOver), so the lines
// of frames the old controller read that land after the restart are
// proven; an entry that does not decode is left out.
func TestHandOverAnnouncements(t *testing.T) {
	frame := func(id, text string) string {
		return fmt.Sprintf(`{"type":"assistant","uuid":%q,"session_id":"","message":{"role":"assistant","content":[{"type":"text","text":%q}]}}`, id, text)
	}
	read := func(exec string, lines ...string) *claude.Conn {
		t.Helper()
		c, err := claude.New(strings.NewReader(strings.Join(lines, "\n")+"\n"), nopCloser{}, "", engine.Options{Execution: exec})
		if err != nil {
			t.Fatal(err)
		}
		for range c.Events() {
		}
		return c
	}
	// The old connection's engine still runs (its stdout open): two
	// frames read, then a prompt sent that the engine never acknowledges
	// (delivery-unknown, but written, and announced).
	out, stdout := io.Pipe()
	t.Cleanup(func() { stdout.Close() })
	old, err := claude.New(out, nopCloser{}, "", engine.Options{Execution: "x1", CommandTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range old.Events() {
		}
	}()
	const result = `{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","session_id":""}`
	if _, err := io.WriteString(stdout, frame("a1", "hello")+"\n"+frame("a2", "tool call")+"\n"+result+"\n"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, ok := old.Announced("a2"); return ok && !old.Turn().Running })
	d, perr := old.Prompt(context.Background(), "go on")
	if d.RequestID == "" || !old.SentPrompt(d.RequestID) {
		t.Fatalf("the prompt was not sent: %+v (%v)", d, perr)
	}
	said := handOver(old)
	if len(said) != 3 || said[0].UUID != "a1" || said[1].UUID != "a2" || said[2].UUID != d.RequestID || !said[2].Prompt || said[0].Prompt {
		t.Fatalf("handed over %+v; want a1, a2 and the prompt %s", said, d.RequestID)
	}
	said = append(said, claims.Announcement{UUID: "bad", Said: "not hex"}, claims.Announcement{UUID: "short", Said: "0102"})
	next := read("x2")
	if n := takeOver(next, said); n != 3 {
		t.Fatalf("took over %d announcements; want the 3 that decode", n)
	}
	for _, id := range []string{"a1", "a2", d.RequestID} {
		want, _ := old.Announced(id)
		if got, ok := next.Announced(id); !ok || got != want {
			t.Fatalf("%s after the take-over: announced %v, %x; want %x", id, ok, got[:4], want[:4])
		}
	}
	if !next.SentPrompt(d.RequestID) || next.SentPrompt("a1") {
		t.Fatal("the take-over did not keep which uuid is a prompt this controller sent")
	}
	if _, ok := next.Announced("bad"); ok {
		t.Fatal("an entry that does not decode was taken over")
	}
}

// TestHandedMark: a restart hands over the last read vouched for whole,
// or the lines proven after it up to the first held back, whichever is
// more; a read the file no longer holds gives only the whole vouch.
func TestHandedMark(t *testing.T) {
	const u1, a1, u2, c1 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-0000000000a1",
		"00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-0000000000c1"
	lines := []string{tline("prompt", u1, ""), tline("assistant", a1, u1), tline("prompt", u2, a1), cline("attachment:date", c1, u2, "today")}
	whole := readLines(t, lines[:2]...)
	now := readLines(t, lines...)
	vouched := &claims.FileState{Size: whole.Size(), SHA256: whole.Digest()}
	before, _, _ := now.Before(4)
	for _, tc := range []struct {
		name string
		hb   *heldBack
		want int64
	}{
		{"nothing held back", nil, whole.Size()},
		{"the prompt proven, the attachment held back", &heldBack{t: now, line: 4}, before},
		{"no line named", &heldBack{t: now}, whole.Size()},
		{"held back before the whole vouch", &heldBack{t: now, line: 1}, whole.Size()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := handedMark(vouched, tc.hb); got.Size != tc.want {
				t.Fatalf("handed %d bytes; want %d", got.Size, tc.want)
			}
		})
	}
}

// TestMarkCarriesNotifications: what a Claude connection counted of task
// notifications goes into its mark (markNow) and, read back after a
// crash or a restart, is counted by the next controller's connection
// (takeNotices): a notification's line, proven by a count of frames and
// not a uuid, that lands after the restart is proven by the frame the
// previous controller read. A count that does not decode is left out,
// and a mark that does not read hands over none.
func TestMarkCarriesNotifications(t *testing.T) {
	const note = `{"type":"system","subtype":"task_notification","task_id":"b1","tool_use_id":"toolu_1","status":"completed","output_file":"/tmp/b1.output","summary":"done","uuid":"n1","session_id":""}`
	read := func(exec string, lines ...string) *claude.Conn {
		t.Helper()
		c, err := claude.New(strings.NewReader(strings.Join(lines, "\n")+"\n"), nopCloser{}, "", engine.Options{Execution: exec})
		if err != nil {
			t.Fatal(err)
		}
		for range c.Events() {
		}
		return c
	}
	said := hclaude.NotificationSaid("b1", "toolu_1", "/tmp/b1.output", "completed", "done")
	old := read("x1", note)
	if old.Notified(said) != 1 {
		t.Fatalf("the frame counted %d times; want once", old.Notified(said))
	}
	x := &execution{id: "x1", conn: old}
	x.vouched.Store(&claims.FileState{Size: 10, SHA256: strings.Repeat("ab", 32)})
	c := &Controller{}
	f, err := newMark()
	if err != nil {
		t.Fatal(err)
	}
	st := c.markNow(x)
	st.Notified = append(st.Notified, markNotice{Said: "not hex", N: 3})
	if _, err := writeMark(f, 0, st); err != nil {
		t.Fatal(err)
	}
	m := takeMark("x1", f)
	defer m.close()
	next := read("x1")
	if n := takeNotices(next, m.notices()); n != 1 || next.Notified(said) != 1 {
		t.Fatalf("took %d counts, the notification counts %d; want the one that decodes, once", n, next.Notified(said))
	}
	m.err = errNoMark
	if got := m.notices(); got != nil {
		t.Fatalf("a mark that does not read hands over %+v", got)
	}
}
