package controller

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
)

// TestControlQueueBudget: control records queued for a client that does
// not read count against the server's queue budget; the record that does
// not fit closes the connection as too slow, and what the connection held
// is given back when it is gone, so one slow reader cannot keep others'
// records out.
func TestControlQueueBudget(t *testing.T) {
	srv, cli := net.Pipe()
	defer cli.Close()
	q := &budget{max: 1 << 20}
	k := newConn("k-test", srv)
	k.queue = q // no writeLoop: nothing is read off the queue
	page := map[string]string{"record": "observed", "history": strings.Repeat("x", 200<<10)}
	var err error
	sent := 0
	for ; sent < 10 && err == nil; sent++ {
		err = k.send(page)
	}
	if !errors.Is(err, errSlow) {
		t.Fatalf("after %d records of 200 KiB into a 1 MiB budget: %v; want errSlow", sent, err)
	}
	select {
	case <-k.closing:
	default:
		t.Fatal("the slow connection was not closed")
	}
	if used := q.inUse(); used == 0 || used > q.max {
		t.Fatalf("budget in use %d; want within (0, %d]", used, q.max)
	}
	other := newConn("k-other", srv)
	other.queue = q
	k.releaseQueue()
	if used := q.inUse(); used != 0 {
		t.Fatalf("budget in use after the connection is gone: %d", used)
	}
	if err := other.send(page); err != nil {
		t.Fatalf("another connection after the release: %v", err)
	}
}

// observedSessionHead is the session observedSession writes: a header and
// one message "hi" (m1); moreLine is a message z1 that continues it.
const (
	observedSessionHead = `{"type":"session","version":3,"id":"s-1","timestamp":"2026-12-01T00:00:00.000Z","cwd":"/p"}` + "\n" +
		`{"type":"message","id":"m1","parentId":null,"timestamp":"2026-12-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}` + "\n"
	moreLine = `{"type":"message","id":"z1","parentId":"m1","timestamp":"2026-12-01T00:00:02.000Z","message":{"role":"user","content":[{"type":"text","text":"more"}]}}` + "\n"
)

// observedSession is a controller (not started) of a Pi conversation
// whose session file holds observedSessionHead, and that file's path.
func observedSession(t *testing.T) (*Controller, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(observedSessionHead), 0o644); err != nil {
		t.Fatal(err)
	}
	return New(Config{Conversation: &conversations.Conversation{Session: path}}), path
}

// TestObservesShareSnapshot: observes of an unchanged session file share
// one snapshot (so cursors of many connections hold one copy), and a
// change of the file gives a new one.
func TestObservesShareSnapshot(t *testing.T) {
	c, path := observedSession(t)
	a, err := c.readSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.readSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two observes of an unchanged file hold two snapshots")
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, moreLine)
	f.Close()
	d, err := c.readSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d == a || !d.Has("z1") {
		t.Fatal("an observe after the file grew got the old snapshot")
	}
	if d.Epoch() != a.Epoch() {
		t.Fatal("an observe after an append read the file afresh instead of following the snapshot before")
	}
	// Rewritten in place, then replaced: the follow refuses, and the
	// observe shows what the file holds now.
	rewritten := strings.Replace(observedSessionHead, `"hi"`, `"HI"`, 1) + moreLine
	for _, step := range []string{"rewrite", "replace"} {
		if step == "replace" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			rewritten = strings.Replace(observedSessionHead, `"hi"`, `"bye"`, 1)
		}
		if err := os.WriteFile(path, []byte(rewritten), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := c.readSnapshot()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if e.Epoch() == a.Epoch() || e.Has("z1") != (step == "rewrite") {
			t.Fatalf("%s: the observe did not show the file as it is now", step)
		}
	}
}

// TestObserveSeesAHalfLine: an observe shares the snapshot before only
// when it serves the same; a line half written since (no LF yet) changes
// no byte the snapshot hashed but makes the page Incomplete, and its LF
// makes it complete again.
func TestObserveSeesAHalfLine(t *testing.T) {
	c, path := observedSession(t)
	for i, add := range []string{"", moreLine[:40], "", moreLine[40:]} {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(f, add)
		f.Close()
		s, err := c.readSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 1 || i == 2; s.Incomplete() != want {
			t.Fatalf("observe %d: Incomplete %v, want %v", i, s.Incomplete(), want)
		}
	}
}

// TestDroppedClientReadsNoGap: a record that does not fit the budget
// drops the client, and nothing queued after it reaches the client
// (neither from the writer nor from the flush at close), so a client
// never reads past a record it did not get: it sees the close and
// reconciles, instead of reading a binding or an approval after a missing
// one as if the stream were whole.
func TestDroppedClientReadsNoGap(t *testing.T) {
	srv, cli := net.Pipe()
	defer cli.Close()
	k := newConn("k-test", srv)
	k.queue = &budget{max: 1 << 10}
	rec := func(name string, size int) map[string]string {
		return map[string]string{"record": name, "pad": strings.Repeat("x", size)}
	}
	if err := k.send(rec("first", 100)); err != nil {
		t.Fatal(err)
	}
	if err := k.send(rec("lost", 2<<10)); !errors.Is(err, errSlow) {
		t.Fatalf("a record over the budget: %v; want errSlow", err)
	}
	k.send(rec("after", 100)) // fits the budget again: must not be queued
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(cli)
		read <- string(b)
	}()
	go k.writeLoop()
	k.close()
	k.flush()
	srv.Close()
	if got := <-read; strings.Contains(got, `"after"`) {
		t.Fatalf("the client read a record queued after the one it lost: %q", got)
	}
}
