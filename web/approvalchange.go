package web

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
)

// approvalsChange is what a stream sends of the decisions a tab holds:
// their order, by the tab's keys, and only the views that changed since
// the stream last sent them. An engine that keeps one dialog changing
// (or opens and settles dialogs in a loop) then costs each wake-up the
// one view that changed, not the whole set (up to maxHeldApprovals
// views of up to 64 KiB each) encoded and sent again. A key the order no
// longer names has left the tab.
type approvalsChange struct {
	Order []string                   `json:"order"`
	Set   map[string]json.RawMessage `json:"set"`
}

// keyApprovalLocked gives a newly held decision its key on the page's
// stream: the engine's decision id is its own string, and two ids may
// read alike once made inert.
func (t *tab) keyApprovalLocked(h *heldApproval) {
	t.approvalSeq++
	h.key = "a" + strconv.FormatUint(t.approvalSeq, 10)
}

// approvalsChangeLocked is the change from sent (each key's view as a
// stream sent it, by digest) to the decisions the tab holds, and what the
// stream will have sent after it; nil when nothing changed. A stream
// starts from nil: its first change holds every view, so a reattached
// page gets the whole set the way a fresh one does.
//
// A stream keeps each view's digest, never the view: a view's encoding
// is the engine's text made inert and JSON-escaped (64 KiB of "<" is
// 384 KiB), and a copy of the whole set per stream would cost every
// open tab up to the set's size again.
func (t *tab) approvalsChangeLocked(sent map[string]string) (*approvalsChange, map[string]string) {
	c := &approvalsChange{Order: make([]string, 0, len(t.approvals)), Set: map[string]json.RawMessage{}}
	next := make(map[string]string, len(t.approvals))
	for _, h := range t.approvals {
		b := mustJSON(h.view)
		sum := sha256.Sum256(b)
		d := string(sum[:])
		c.Order = append(c.Order, h.key)
		next[h.key] = d
		if old, ok := sent[h.key]; !ok || old != d {
			c.Set[h.key] = b
		}
	}
	// Keys are only added (with their view) or removed: the same count
	// and nothing set is the same order.
	if sent != nil && len(c.Set) == 0 && len(next) == len(sent) {
		return nil, sent
	}
	return c, next
}
