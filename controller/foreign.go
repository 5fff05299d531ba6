package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// watchSession detects a foreign writer (W10): an entry appended to the
// bound session file whose id the engine does not hold in its own session
// was written by someone else (another `pi --session` on the same file).
// Admission closes, the binding becomes uncertain and clients get a
// reconcile marker. The controller itself only ever reads the file.
func (c *Controller) watchSession(x *execution, known map[string]bool) {
	path := c.cfg.Conversation.Session
	var lastSize int64 = -1
	var lastMod time.Time
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for range t.C {
		c.mu.Lock()
		current := c.st.exec == x && !x.exited
		c.mu.Unlock()
		if !current {
			return
		}
		fi, err := os.Stat(path)
		if err != nil || (fi.Size() == lastSize && fi.ModTime().Equal(lastMod)) {
			continue
		}
		lastSize, lastMod = fi.Size(), fi.ModTime()
		head, err := readSessionHead(path)
		if err != nil {
			continue
		}
		var fresh []string
		for id := range head.ids {
			if !known[id] {
				fresh = append(fresh, id)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		// Ask the engine after reading the file: Pi adds an entry to its
		// session before it appends it to the file.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ents, err := x.conn.GetEntries(ctx, "")
		cancel()
		if err != nil {
			continue
		}
		ours := map[string]bool{}
		for _, raw := range ents.Entries {
			var e struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &e) == nil {
				ours[e.ID] = true
			}
		}
		for _, id := range fresh {
			if ours[id] {
				known[id] = true
				continue
			}
			c.foreign(x, id)
			return
		}
	}
}

// foreign closes admission after a foreign append.
func (c *Controller) foreign(x *execution, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.binding = protocol.BindingUncertain
	c.st.reconcile = true
	c.closeAdmissionLocked(fmt.Sprintf("foreign-writer: entry %s was appended to the session file by another writer", id))
	c.broadcastLocked(protocol.Notice{Record: "notice", Kind: "foreign-writer",
		Message: "another writer appended to this conversation's session file; admission is closed and the view must be re-read"})
	c.publishBindingLocked()
	if c.st.claim != nil {
		go c.claimDo(func(cl *claims.Claim) error {
			return cl.MarkUncertain(context.Background(), "foreign writer appended entry "+id)
		})
	}
	c.audit(audit.Foreign, nil, "foreign writer: entry "+id+" is not the engine's", map[string]string{"ENTRY": id, "EXECUTION": x.id, "REFUSAL": "foreign-writer"})
}
