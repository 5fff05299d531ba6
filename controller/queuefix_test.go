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
	"github.com/mosaic-agents/mosaic/engine/pi"
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

// pipeEngine wires c to a scripted Pi on pipes as execution id: each
// prompt's message goes to the returned channel, and answer(cmdID) is
// written back as Pi's response line (it may block, as a Pi that has not
// answered yet).
func pipeEngine(t *testing.T, c *Controller, id string, answer func(cmdID string) string) (*execution, chan string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ec, err := pi.New(outR, inW, engine.Options{Execution: id})
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{id: id, conn: ec}
	c.bus.reset(x.id)
	go c.pump(x)
	prompts := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var cmd struct{ ID, Message string }
			json.Unmarshal(sc.Bytes(), &cmd)
			prompts <- cmd.Message
			io.WriteString(outW, answer(cmd.ID))
		}
	}()
	t.Cleanup(func() { outW.Close(); inW.Close() })
	return x, prompts
}

// piAnswer is Pi's response to prompt cmdID: success, or its refusal text.
func piAnswer(cmdID, refusal string) string {
	if refusal == "" {
		return `{"id":"` + cmdID + `","type":"response","command":"prompt","success":true}` + "\n"
	}
	return `{"id":"` + cmdID + `","type":"response","command":"prompt","success":false,"error":"` + refusal + `"}` + "\n"
}

// authorise makes x the active execution, k-1 the controller, and the
// queue authorised to send to x.
func authorise(c *Controller, x *execution) {
	c.mu.Lock()
	c.st.exec, c.st.binding, c.st.admission, c.st.controller = x, protocol.BindingActive, true, "k-1"
	c.q.gen, c.q.exec, c.q.paused, c.q.reason = c.st.generation, x.id, false, ""
	c.mu.Unlock()
}

// addItems stores and queues one item per text, in order.
func addItems(t *testing.T, c *Controller, first uint64, texts ...string) []string {
	t.Helper()
	var ids []string
	for i, text := range texts {
		ids = append(ids, putItem(t, c, qfItem(first+uint64(i), text)))
	}
	return ids
}

// putItem stores it and makes it the controller's current revision.
func putItem(t *testing.T, c *Controller, it queue.Item) string {
	t.Helper()
	if err := c.q.store.Write(it); err != nil {
		t.Fatal(err)
	}
	c.q.mu.Lock()
	c.mu.Lock()
	c.setItemLocked(it)
	c.mu.Unlock()
	c.q.mu.Unlock()
	return it.ID
}

// editAs sends edit-queued of item id at rev from k-1, made the controller.
func editAs(c *Controller, id string, rev int, text string) error {
	g := int64(0)
	c.mu.Lock()
	c.st.controller = "k-1"
	c.mu.Unlock()
	_, err := c.editQueued(context.Background(), &conn{id: "k-1"}, &protocol.Command{Type: protocol.CmdEditQueued, Request: newID("e-"), Generation: &g, Item: id, Revision: &rev, Text: text})
	return err
}

const piBusyText = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."

// A hold from Pi's "already processing" belongs to the execution that
// answered: after a force stop and a relaunch, the first prompt goes to
// the idle new engine (the new execution's settle count starts at 0, and
// must not be compared with the old one's).
func TestQueueHoldIgnoredByNewExecution(t *testing.T) {
	c := qfCtl(t, t.TempDir())
	c.loadQueue()
	x1, _ := pipeEngine(t, c, "e-1", func(id string) string { return piAnswer(id, piBusyText) })
	authorise(c, x1)
	addItems(t, c, 1, "head")
	c.dispatchNext(ctx20(t))                   // Pi: already processing -> hold
	c.recoverDrafts(&protocol.Stop{ID: "s-1"}) // force stop: head becomes a draft

	x2, prompts2 := pipeEngine(t, c, "e-2", func(id string) string { return piAnswer(id, "") }) // relaunch
	authorise(c, x2)
	addItems(t, c, 2, "first prompt on the new engine")
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
	c := qfCtl(t, t.TempDir())
	c.loadQueue()
	x, prompts := pipeEngine(t, c, "e-1", func(id string) string { return piAnswer(id, "No API key found for provider") })
	authorise(c, x)
	addItems(t, c, 1, "fix the bug", "now run the tests", "then push")
	for c.dispatchNext(ctx20(t)) { // what schedule does on one kick
	}
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
	putItem(t, c, it)
	if err := editAs(c, it.ID, 1, big); protocol.CodeOf(err) != protocol.CodeEditLimit {
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
	putItem(t, c, it)
	failSync = true
	err := editAs(c, it.ID, 1, "edited")
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
	if err := editAs(c, it.ID, live.Revision, "again"); err != nil {
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
		putItem(t, c, qfItem(uint64(i), "draft text "+string(rune('a'+i%26))))
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
	c := qfCtl(t, t.TempDir())
	c.loadQueue()
	written, release := make(chan string, 1), make(chan struct{})
	x, _ := pipeEngine(t, c, "e-1", func(id string) string {
		written <- id
		<-release // Pi has not answered yet
		return piAnswer(id, "")
	})
	authorise(c, x)
	ids := addItems(t, c, 1, "head", "second", "third")
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

// A finished item that no record shows text for keeps only digests in
// memory; its text stays on disk, whole, for a restart to read.
func TestQueueFinishedItemsHoldNoText(t *testing.T) {
	dir := t.TempDir()
	c := qfCtl(t, dir)
	c.loadQueue()
	id := addItems(t, c, 1, "a long prompt that was cancelled")[0]
	g, rev := int64(0), 1
	c.mu.Lock()
	c.st.controller = "k-1"
	c.mu.Unlock()
	if _, err := c.cancelQueued(context.Background(), &conn{id: "k-1"}, &protocol.Command{Type: protocol.CmdCancelQueued, Request: "c1", Generation: &g, Item: id, Revision: &rev}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	mem := *c.itemLocked(id)
	c.mu.Unlock()
	if mem.Current().Text != "" || mem.Current().Digest != queue.Digest("a long prompt that was cancelled") {
		t.Fatalf("the cancelled item in memory: %+v; want its digest without its text", mem.Current())
	}
	stored, err := c.q.store.Read(id, mem.Revision)
	if err != nil || stored.Current().Text != "a long prompt that was cancelled" {
		t.Fatalf("the stored revision: %+v, %v; want the text kept on disk", stored.Current(), err)
	}
}
