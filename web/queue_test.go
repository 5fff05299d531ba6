package web

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

func queueRec(rev uint64, items ...protocol.QueueItem) *protocol.Queue {
	return &protocol.Queue{Record: protocol.RecordQueue, Revision: rev, Items: items}
}

// TestTabQueue covers how a tab holds the prompt queue for its page: a
// newer revision replaces the held one and an older or equal one never
// does (an observe's snapshot read before a change, a reply after its
// broadcast); waiting items become chips and drafts are kept apart, every
// string inert, with the exact text only where it differs.
func TestTabQueue(t *testing.T) {
	hostile := "a <script>x</script>\n\u202eevil"
	waiting := protocol.QueueItem{ID: "qi-1", Revision: 2, State: protocol.ReceiptQueued, Text: hostile}
	plain := protocol.QueueItem{ID: "qi-2", Revision: 1, State: protocol.ReceiptDispatched, Text: "plain"}
	draft := protocol.QueueItem{ID: "qi-3", Revision: 3, State: protocol.ReceiptDraft, Text: "draft text"}
	done := protocol.QueueItem{ID: "qi-4", Revision: 4, State: protocol.ReceiptAcknowledged}

	t.Run("never older", func(t *testing.T) {
		var tb tab
		for _, c := range []struct {
			rev  uint64
			want uint64
		}{{5, 5}, {4, 5}, {5, 5}, {7, 7}, {0, 7}} {
			tb.holdQueueLocked(queueRec(c.rev, protocol.QueueItem{ID: "qi-1", State: protocol.ReceiptQueued, Text: "r" + string(rune('0'+c.rev))}))
			if tb.queue.Revision != c.want {
				t.Errorf("after revision %d the tab holds revision %d, want %d", c.rev, tb.queue.Revision, c.want)
			}
		}
		if got := tb.queue.Items[0].Text; got != "r7" {
			t.Errorf("the held item reads %q, want the newest revision's r7", got)
		}
		tb.holdQueueLocked(nil)
		if tb.queue == nil {
			t.Errorf("an observe without a queue dropped the held one")
		}
	})

	t.Run("chips and drafts, inert", func(t *testing.T) {
		q := queueRec(9, waiting, plain, draft, done)
		q.Paused, q.PauseReason = true, "interrupted \x1b[31m"
		v := queueViewOf(q)
		if len(v.Items) != 2 || v.Items[0].ID != "qi-1" || v.Items[1].ID != "qi-2" || len(v.Drafts) != 1 || v.Drafts[0].ID != "qi-3" {
			t.Fatalf("view %+v: want the two waiting items in order and the one draft", v)
		}
		if want := "a <script>x</script>^J<U+202E>evil"; v.Items[0].Text != want || strings.ContainsAny(v.PauseReason, "\x1b") {
			t.Errorf("the chip text %q or the pause reason %q is not inert", v.Items[0].Text, v.PauseReason)
		}
		if v.Items[0].Exact != hostile || v.Items[1].Exact != "" || v.Drafts[0].Exact != "" {
			t.Errorf("exact texts %q, %q, %q: want the person's bytes only where they differ from the inert text", v.Items[0].Exact, v.Items[1].Exact, v.Drafts[0].Exact)
		}
		if n := waitingOf(q); n != 2 {
			t.Errorf("waitingOf = %d, want 2", n)
		}
	})

	t.Run("reply view", func(t *testing.T) {
		r := replyView(&client.Reply{Queue: queueRec(3, waiting)})
		if v, ok := r.(*queueView); !ok || v.Items[0].Text == hostile {
			t.Errorf("a queue reply is shown as %#v, want the inert queue view", r)
		}
	})
}
