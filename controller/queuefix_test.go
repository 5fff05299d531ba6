package controller

// Regression tests for the prompt queue's review findings (issue 13):
// each failed before its fix.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

func qfCtl(t *testing.T, dir string) *Controller {
	t.Helper()
	store, err := claims.Open(filepath.Join(dir, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{ID: "pi-queuefix", Session: filepath.Join(dir, "s.jsonl")}
	return New(Config{Conversation: cv, Claims: store, Audit: audit.NewWriter(cv.ID, io.Discard)})
}

func qfItem(seq uint64, text string) queue.Item {
	return queue.Item{ID: newID("qi-"), Seq: seq, Revision: 1, State: protocol.ReceiptQueued, Request: newID("p-"), Receipt: newID("rc-"),
		Fingerprint: "fp", Actor: Actor, Connection: "k-1", Execution: "e-1", Admitted: now(), Updated: now(),
		Payloads: []queue.Payload{queue.NewPayload(1, text, Actor, "k-1", 0, now())}}
}

// A dispatched item whose engine write never happened (crash between
// the dispatched revision and the write) must not be settled delivered
// because an EARLIER, unrelated user message of the same text is in the
// session file (a short text such as "continue", sent before the queue
// item, or by an item retention already forgot).
func TestQueueSettleIgnoresEarlierHistory(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	// The session already holds "continue" from a turn long ago.
	os.WriteFile(c.cfg.Conversation.Session, []byte(`{"type":"session","id":"x"}`+"\n"+
		`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"continue"}]}}`+"\n"), 0o600)
	st, err := queue.Open(c.queueRoot(), c.cfg.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	it := qfItem(1, "continue")
	if err := st.Write(it); err != nil {
		t.Fatal(err)
	}
	d := it.Next()
	d.State = protocol.ReceiptDispatched
	d.Dispatch = &queue.Dispatch{Execution: "e-1", At: now()}
	if err := st.Write(d); err != nil { // the controller is SIGKILLed here, before x.conn.Prompt
		t.Fatal(err)
	}
	c.loadQueue()
	c.mu.Lock()
	got := c.itemLocked(it.ID).State
	c.mu.Unlock()
	if got != protocol.ReceiptDeliveryUnknown {
		t.Fatalf("never-written item settled %q after restart; want %q (the session's copy predates the dispatch)", got, protocol.ReceiptDeliveryUnknown)
	}
}

// A dispatched item is proven delivered by a user message after its
// recorded position; two items with the same text need two messages, and
// an item without a position is never proven.
func TestQueueSettleMatchesOncePerItem(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	head := `{"type":"session","id":"x"}` + "\n" + `{"type":"message","message":{"role":"user","content":"continue"}}` + "\n"
	after := `{"type":"message","message":{"role":"user","content":"continue"}}` + "\n"
	os.WriteFile(c.cfg.Conversation.Session, []byte(head+after), 0o600)
	st, err := queue.Open(c.queueRoot(), c.cfg.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(head))
	var ids []string
	for i, pos := range []*int64{&at, &at, nil} {
		it := qfItem(uint64(i+1), "continue")
		if err := st.Write(it); err != nil {
			t.Fatal(err)
		}
		d := it.Next()
		d.State = protocol.ReceiptDispatched
		d.Dispatch = &queue.Dispatch{Execution: "e-1", At: now(), SessionAt: pos}
		if err := st.Write(d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	c.loadQueue()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := []string{protocol.ReceiptDelivered, protocol.ReceiptDeliveryUnknown, protocol.ReceiptDeliveryUnknown}
	for i, id := range ids {
		if got := c.itemLocked(id).State; got != want[i] {
			t.Errorf("item %d settled %q; want %q", i+1, got, want[i])
		}
	}
}

// After Pi answered "already processing" (hold set at the old
// execution's settle count), the engine is replaced (force stop or exit,
// then launch). The hold is compared with the NEW execution's settle
// count, which starts at 0: the first prompt on the new engine never goes.
func TestQueueHoldIgnoredByNewExecution(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	peer := func(id string, busy bool) (*execution, chan string, func()) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		conn, err := engine.New(outR, inW, engine.Options{Execution: id})
		if err != nil {
			t.Fatal(err)
		}
		x := &execution{id: id, conn: conn}
		c.bus.reset(x.id)
		go c.pump(x)
		prompts := make(chan string, 8)
		go func() {
			sc := bufio.NewScanner(inR)
			for sc.Scan() {
				var cmd struct{ ID, Message string }
				json.Unmarshal(sc.Bytes(), &cmd)
				prompts <- cmd.Message
				reply := `{"id":"` + cmd.ID + `","type":"response","command":"prompt","success":true}` + "\n"
				if busy {
					reply = `{"id":"` + cmd.ID + `","type":"response","command":"prompt","success":false,"error":"Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."}` + "\n"
				}
				io.WriteString(outW, reply)
			}
		}()
		return x, prompts, func() { outW.Close(); inW.Close() }
	}
	x1, _, close1 := peer("e-1", true)
	defer close1()
	c.mu.Lock()
	c.st.exec, c.st.binding, c.st.admission, c.st.controller = x1, protocol.BindingActive, true, "k-1"
	c.q.gen, c.q.exec = c.st.generation, x1.id
	c.mu.Unlock()
	head := qfItem(1, "head")
	if err := c.q.store.Write(head); err != nil {
		t.Fatal(err)
	}
	c.q.mu.Lock()
	c.mu.Lock()
	c.setItemLocked(head)
	c.mu.Unlock()
	c.q.mu.Unlock()
	c.dispatchNext(ctx20(t))                   // Pi: already processing -> hold
	c.recoverDrafts(&protocol.Stop{ID: "s-1"}) // force stop: head becomes a draft

	x2, prompts2, close2 := peer("e-2", false) // relaunch
	defer close2()
	c.mu.Lock()
	c.st.exec = x2
	c.q.gen, c.q.exec, c.q.paused, c.q.reason = c.st.generation, x2.id, false, ""
	c.mu.Unlock()
	next := qfItem(2, "first prompt on the new engine")
	if err := c.q.store.Write(next); err != nil {
		t.Fatal(err)
	}
	c.q.mu.Lock()
	c.mu.Lock()
	c.setItemLocked(next)
	c.mu.Unlock()
	c.q.mu.Unlock()
	c.dispatchNext(ctx20(t))
	if len(prompts2) != 1 {
		c.mu.Lock()
		t.Fatalf("the idle new engine got %d prompts; hold=%v heldAt=%d settled=%d", len(prompts2), c.q.hold, c.q.heldAt, x2.settled)
	}
}

// Pi refusing prompts (no API key, a broken extension) must not burn the
// queue in a burst: the head fails, the queue pauses with the rest still
// queued, and the failed item's text stays in the queue record for a
// sender that did not wait.
func TestQueueFailurePausesAndKeepsText(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn, err := engine.New(outR, inW, engine.Options{Execution: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{id: "e-1", conn: conn}
	c.bus.reset(x.id)
	go c.pump(x)
	c.mu.Lock()
	c.st.exec, c.st.binding, c.st.admission, c.st.controller = x, protocol.BindingActive, true, "k-1"
	c.q.gen, c.q.exec = c.st.generation, x.id
	c.mu.Unlock()
	prompts := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var cmd struct{ ID, Message string }
			json.Unmarshal(sc.Bytes(), &cmd)
			prompts <- cmd.Message
			io.WriteString(outW, `{"id":"`+cmd.ID+`","type":"response","command":"prompt","success":false,"error":"No API key found for provider"}`+"\n")
		}
	}()
	for i, text := range []string{"fix the bug", "now run the tests", "then push"} {
		it := qfItem(uint64(i+1), text)
		if err := c.q.store.Write(it); err != nil {
			t.Fatal(err)
		}
		c.q.mu.Lock()
		c.mu.Lock()
		c.setItemLocked(it)
		c.mu.Unlock()
		c.q.mu.Unlock()
	}
	for c.dispatchNext(ctx20(t)) { // what schedule does on one kick
	}
	outW.Close()
	inW.Close()
	c.mu.Lock()
	rec := c.queueRecordLocked()
	c.mu.Unlock()
	shown := 0
	for _, qi := range rec.Items {
		if qi.State == protocol.ReceiptFailed && qi.Text != "" {
			shown++
		}
	}
	if n := len(prompts); n > 1 || !rec.Paused || shown == 0 {
		t.Fatalf("after Pi refused the head: %d prompts written, paused=%v, failed items with text shown=%d; want 1 written, the queue paused, the failed text visible", n, rec.Paused, shown)
	}
}

// An item's edits are bounded so its revision always stays readable: an
// item at maxEdits edits of the longest, most-escaped text refuses one
// more (edit-limit, unchanged), and a restart still finds it queued with
// its text. Before the bound, ~21 such edits made the item
// recovery-failed at the next restart and dropped its text.
func TestQueueEditsBounded(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	big := strings.Repeat("\x01", maxPromptChars) // 256 Ki characters, 1.5 MiB once JSON-escaped
	it := qfItem(1, big)
	for i := 2; i <= maxEdits+1; i++ {
		it.Payloads = append(it.Payloads, queue.NewPayload(i, big, Actor, "k-1", 0, now()))
	}
	if err := c.q.store.Write(it); err != nil {
		t.Fatal(err)
	}
	k := &conn{id: "k-1"}
	c.mu.Lock()
	c.setItemLocked(it)
	c.st.controller = "k-1"
	c.mu.Unlock()
	g, rev := int64(0), 1
	_, err := c.editQueued(context.Background(), k, &protocol.Command{Type: protocol.CmdEditQueued, Request: "e1", Generation: &g, Item: it.ID, Revision: &rev, Text: big})
	if protocol.CodeOf(err) != protocol.CodeEditLimit {
		t.Fatalf("edit %d: %v; want %s", maxEdits+1, err, protocol.CodeEditLimit)
	}
	restarted := qfCtl(t, dir)
	restarted.loadQueue()
	restarted.mu.Lock()
	cur := restarted.itemLocked(it.ID)
	restarted.mu.Unlock()
	if cur == nil || cur.State != protocol.ReceiptQueued || cur.Revision != 1 || cur.Current().Text != big {
		t.Fatalf("after a restart the edited item is %v; want it queued at revision 1 with its text", cur)
	}
}

// A revision write that fails after the link (the directory fsync) left
// the revision on disk: the edit must not be answered "unchanged". The
// live controller takes what the store holds, says the outcome is
// unknown, agrees with what a restart loads, and can edit again.
func TestQueueEditFailureAfterLinkReported(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	var failSync bool
	c.test.queueFault = func(point, path string) error {
		if failSync && point == "dir-synced" {
			return errors.New("injected EIO from fsync of the directory")
		}
		return nil
	}
	c.loadQueue()
	it := qfItem(1, "original")
	if err := c.q.store.Write(it); err != nil {
		t.Fatal(err)
	}
	k := &conn{id: "k-1"}
	c.mu.Lock()
	c.setItemLocked(it)
	c.st.controller = "k-1"
	c.mu.Unlock()
	g, rev := int64(0), 1
	failSync = true
	_, err := c.editQueued(context.Background(), k, &protocol.Command{Type: protocol.CmdEditQueued, Request: "e1", Generation: &g, Item: it.ID, Revision: &rev, Text: "edited"})
	failSync = false
	if protocol.CodeOf(err) != protocol.CodeQueueStore || strings.Contains(err.Error(), "unchanged") || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("edit: %v; want queue-store saying the outcome is unknown, not unchanged", err)
	}
	c.mu.Lock()
	live := *c.itemLocked(it.ID)
	c.mu.Unlock()
	restarted := qfCtl(t, dir)
	restarted.loadQueue()
	restarted.mu.Lock()
	loaded := *restarted.itemLocked(it.ID)
	restarted.mu.Unlock()
	if live.Revision != loaded.Revision || live.Current().Text != loaded.Current().Text {
		t.Fatalf("live controller holds revision %d %q, a restart loads revision %d %q", live.Revision, live.Current().Text, loaded.Revision, loaded.Current().Text)
	}
	rev = live.Revision
	if _, err := c.editQueued(context.Background(), k, &protocol.Command{Type: protocol.CmdEditQueued, Request: "e2", Generation: &g, Item: it.ID, Revision: &rev, Text: "again"}); err != nil {
		t.Fatalf("the next edit after the unconfirmed one: %v", err)
	}
}

// A force stop with more than shownFinished queued items: every draft the
// stop record lists is in the queue record with its text; a draft is not
// forgotten by age, and cancel-queued discards it.
func TestQueueDraftsAllShown(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	for i := 1; i <= 40; i++ {
		it := qfItem(uint64(i), "draft text "+string(rune('a'+i%26)))
		if err := c.q.store.Write(it); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.setItemLocked(it)
		c.mu.Unlock()
	}
	s := &protocol.Stop{ID: "s-1"}
	c.recoverDrafts(s)
	c.mu.Lock()
	rec := c.queueRecordLocked()
	c.mu.Unlock()
	withText := 0
	for _, qi := range rec.Items {
		if qi.State == protocol.ReceiptDraft && qi.Text != "" {
			withText++
		}
	}
	if len(s.QueueDrafts) != 40 || withText != 40 {
		t.Fatalf("force stop drafted %d items; the queue record shows %d of them with text; want all 40", len(s.QueueDrafts), withText)
	}
	c.mu.Lock()
	first := *c.itemLocked(s.QueueDrafts[0])
	for _, it := range c.q.items {
		it.Updated = time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339Nano)
	}
	c.st.controller = "k-1"
	c.mu.Unlock()
	c.q.mu.Lock()
	c.forgetFinished()
	c.q.mu.Unlock()
	if st, _ := itemState(c, first.ID); st != protocol.ReceiptDraft {
		t.Fatalf("a two-day-old draft is %q after retention; want it kept", st)
	}
	g, rev := int64(0), first.Revision
	if _, err := c.cancelQueued(context.Background(), &conn{id: "k-1"}, &protocol.Command{Type: protocol.CmdCancelQueued, Request: "c1", Generation: &g, Item: first.ID, Revision: &rev}); err != nil {
		t.Fatalf("cancel a draft: %v", err)
	}
	if st, _ := itemState(c, first.ID); st != protocol.ReceiptCancelled {
		t.Fatalf("the cancelled draft is %q", st)
	}
}

func itemState(c *Controller, id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.itemLocked(id)
	if it == nil {
		return "", false
	}
	return it.State, true
}

// While the engine has not answered a dispatched prompt, the queue lock is
// free: a cancel of the next item and a force stop's draft recovery go
// ahead instead of waiting for Pi's reply (up to the command timeout).
func TestQueueLockFreeWhileEngineAnswers(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ec, err := engine.New(outR, inW, engine.Options{Execution: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{id: "e-1", conn: ec}
	c.bus.reset(x.id)
	go c.pump(x)
	c.mu.Lock()
	c.st.exec, c.st.binding, c.st.admission, c.st.controller = x, protocol.BindingActive, true, "k-1"
	c.q.gen, c.q.exec = c.st.generation, x.id
	c.mu.Unlock()
	written, release := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var cmd struct{ ID, Message string }
			json.Unmarshal(sc.Bytes(), &cmd)
			written <- cmd.ID
			<-release // Pi has not answered yet
			io.WriteString(outW, `{"id":"`+cmd.ID+`","type":"response","command":"prompt","success":true}`+"\n")
		}
	}()
	t.Cleanup(func() { outW.Close(); inW.Close() })
	var ids []string
	for i, text := range []string{"head", "second", "third"} {
		it := qfItem(uint64(i+1), text)
		if err := c.q.store.Write(it); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.setItemLocked(it)
		c.mu.Unlock()
		ids = append(ids, it.ID)
	}
	ctx := ctx20(t)
	dispatched := make(chan bool, 1)
	go func() { dispatched <- c.dispatchNext(ctx) }()
	select {
	case <-written:
	case <-ctx.Done():
		t.Fatal("the head was never written")
	}
	changed := make(chan error, 1)
	go func() {
		g, rev := int64(0), 1
		_, err := c.cancelQueued(ctx, &conn{id: "k-1"}, &protocol.Command{Type: protocol.CmdCancelQueued, Request: "c1", Generation: &g, Item: ids[1], Revision: &rev})
		if err == nil {
			s := &protocol.Stop{ID: "s-1"}
			c.recoverDrafts(s)
			if len(s.QueueDrafts) != 1 || s.QueueDrafts[0] != ids[2] {
				err = fmt.Errorf("drafts %v; want the third item", s.QueueDrafts)
			}
		}
		changed <- err
	}()
	select {
	case err := <-changed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("a cancel and a draft recovery waited for the engine's reply to the head")
	}
	close(release)
	<-dispatched
	if st, _ := itemState(c, ids[0]); st != protocol.ReceiptAcknowledged {
		t.Fatalf("head is %s after Pi answered; want acknowledged", st)
	}
}

// The queue record reaches engine peers without text: the agent must not
// read prompts before they are sent, nor drafts.
func TestQueueTextNotOfferedToEnginePeers(t *testing.T) {
	c := qfCtl(t, t.TempDir())
	c.loadQueue()
	it := qfItem(1, "secret plan for the next turn")
	if err := c.q.store.Write(it); err != nil {
		t.Fatal(err)
	}
	person, agent := newConn("k-1", nil), newConn("k-2", nil)
	person.hello, agent.hello, agent.engine = true, true, true
	c.mu.Lock()
	c.conns[person.id], c.conns[agent.id] = person, agent
	c.setItemLocked(it)
	c.publishQueueLocked()
	c.mu.Unlock()
	for _, tc := range []struct {
		k    *conn
		text bool
	}{{person, true}, {agent, false}} {
		rec := <-tc.k.ctl
		if got := strings.Contains(string(rec.line), "secret plan"); got != tc.text {
			t.Errorf("connection %s (engine peer %v) got the text: %v; want %v", tc.k.id, tc.k.engine, got, tc.text)
		}
	}
	late := newConn("k-3", nil)
	late.engine = true
	c.attach(late)
	for len(late.ctl) > 0 {
		if rec := <-late.ctl; strings.Contains(string(rec.line), "secret plan") {
			t.Errorf("an engine peer attaching got the queue's text: %s", rec.line)
		}
	}
}
