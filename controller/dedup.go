package controller

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Receipt index bounds: the final record of an admitted request is kept
// for exact retries for receiptTTL after it was answered, and at most
// maxReceipts are kept; beyond that the oldest answered one goes first. A
// retry of a forgotten request refuses receipt-unknown, exactly as after
// a controller restart, and dispatches nothing. Requests still being
// handled are never forgotten (their number is bounded by the
// connections, each reading one command at a time, and the stops).
const (
	maxReceipts = 1024
	receiptTTL  = time.Hour
)

// dedupEntry is one admitted request of this controller incarnation.
type dedupEntry struct {
	id      string
	digest  string
	pending bool
	reply   []byte        // the final record, resent on an exact retry
	done    time.Time     // when it was answered
	elem    *list.Element // in dedupIndex.answered once answered
}

// dedupIndex is the receipt index, guarded by Controller.mu.
type dedupIndex struct {
	m        map[string]*dedupEntry
	answered *list.List // of *dedupEntry, oldest answer first
}

func newDedupIndex() *dedupIndex {
	return &dedupIndex{m: map[string]*dedupEntry{}, answered: list.New()}
}

// prune forgets answered entries past the TTL or beyond the cap.
func (d *dedupIndex) prune(now time.Time) {
	for e := d.answered.Front(); e != nil; e = d.answered.Front() {
		de := e.Value.(*dedupEntry)
		if d.answered.Len() <= maxReceipts && now.Sub(de.done) < receiptTTL {
			return
		}
		d.answered.Remove(e)
		delete(d.m, de.id)
	}
}

// dedupBegin returns the stored record of an exact retry, a refusal, or
// neither (a new request, now pending).
func (c *Controller) dedupBegin(request, digest string, retry bool) ([]byte, *protocol.Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it := c.q.byReq[request]; it != nil {
		// A queued prompt's receipt is durable: an exact retry, after a
		// restart too, returns its current revision and sends nothing.
		if it.Fingerprint != digest {
			return nil, protocol.Refuse(protocol.CodeConflictingRequest, "request id %s was used for another command; use a new id", quoted(request))
		}
		line, err := protocol.Line(itemReceipt(it))
		if err == nil {
			return line, nil
		}
	}
	c.dedup.prune(time.Now())
	e, ok := c.dedup.m[request]
	switch {
	case ok && e.digest != digest:
		return nil, protocol.Refuse(protocol.CodeConflictingRequest, "request id %s was used for another command; use a new id", quoted(request))
	case ok && e.pending:
		return nil, protocol.Refuse(protocol.CodeRequestPending, "request %s is still being handled; wait for its record", quoted(request))
	case ok:
		return e.reply, nil
	case retry:
		return nil, protocol.Refuse(protocol.CodeReceiptUnknown,
			"this controller has no record of request %s (it may have restarted, or forgotten it after %s or %d newer receipts); nothing was dispatched again: check the transcript",
			quoted(request), receiptTTL, maxReceipts)
	}
	c.dedup.m[request] = &dedupEntry{id: request, digest: digest, pending: true}
	return nil, nil
}

func (c *Controller) dedupDone(request string, reply []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.dedup.m[request]; e != nil && e.pending {
		e.pending, e.reply, e.done = false, reply, time.Now()
		e.elem = c.dedup.answered.PushBack(e)
		c.dedup.prune(e.done)
	}
}

func (c *Controller) dedupDrop(request string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.dedup.m[request]; e != nil {
		if e.elem != nil {
			c.dedup.answered.Remove(e.elem)
		}
		delete(c.dedup.m, request)
	}
}

// fingerprint digests the command without its request id and retry flag:
// the same content under the same id is a retry, other content a conflict.
func fingerprint(cmd *protocol.Command) string {
	fp := *cmd
	fp.Request, fp.Retry = "", false
	raw, _ := json.Marshal(fp)
	canon, err := proofs.CanonicalizeJSON(raw)
	if err != nil {
		canon = raw
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
