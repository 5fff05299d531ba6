package web

import (
	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// queueView is the prompt queue as the page shows it: the waiting items
// (the chips under the composer) and the recovered drafts, every string
// made inert by terminal.SanitizeLine as `mosaicctl attach` shows it.
type queueView struct {
	Record      string          `json:"record"`
	Revision    uint64          `json:"revision"`
	Paused      bool            `json:"paused"`
	PauseReason string          `json:"pauseReason"`
	Items       []queueItemView `json:"items"`
	Drafts      []queueItemView `json:"drafts"`
}

// queueItemView is one item. Text is what the chip shows. Exact is the
// item's own text when it differs from Text (a line break, a bidi
// control): the page only ever assigns it to a textarea's value (the
// inline edit, "put back in the composer"), which is never markup, so an
// edit or a draft put back keeps the person's bytes instead of the
// notation.
type queueItemView struct {
	ID         string `json:"id"`
	Revision   int    `json:"revision"`
	State      string `json:"state"`
	Text       string `json:"text"`
	Exact      string `json:"exact,omitempty"`
	Edits      int    `json:"edits"`
	Actor      string `json:"actor"`
	Connection string `json:"connection"`
	Generation int64  `json:"generation"`
	Reason     string `json:"reason,omitempty"`
}

func queueViewOf(q *protocol.Queue) *queueView {
	v := &queueView{Record: protocol.RecordQueue, Revision: q.Revision, Paused: q.Paused,
		PauseReason: terminal.SanitizeLine(q.PauseReason), Items: []queueItemView{}, Drafts: []queueItemView{}}
	for _, it := range q.Items {
		iv := queueItemView{ID: terminal.SanitizeLine(it.ID), Revision: it.Revision, State: terminal.SanitizeLine(it.State),
			Text: terminal.SanitizeLine(it.Text), Edits: it.Edits, Actor: terminal.SanitizeLine(it.Actor),
			Connection: terminal.SanitizeLine(it.Connection), Generation: it.Generation, Reason: terminal.SanitizeLine(it.Reason)}
		if iv.Text != it.Text {
			iv.Exact = it.Text
		}
		switch {
		case client.Waiting(it.State):
			v.Items = append(v.Items, iv)
		case it.State == protocol.ReceiptDraft && it.Text != "":
			v.Drafts = append(v.Drafts, iv)
		}
	}
	return v
}

// holdQueueLocked keeps q when it is newer than the queue the tab holds.
// Records can arrive out of revision order (an observe's snapshot read
// before a later change, a command's reply after the broadcast of the
// same revision); an older revision never replaces a newer one, so the
// chips never show an item that already left the queue as waiting.
func (t *tab) holdQueueLocked(q *protocol.Queue) {
	if q == nil || (t.queue != nil && q.Revision <= t.queue.Revision) {
		return
	}
	t.queue = queueViewOf(q)
}

// waitingOf counts a queue's waiting items, for the list's Queue column.
func waitingOf(q *protocol.Queue) int {
	n := 0
	for _, it := range q.Items {
		if client.Waiting(it.State) {
			n++
		}
	}
	return n
}
