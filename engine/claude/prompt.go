package claude

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NewSession returns a fresh session UUID for a new conversation.
func NewSession() string { return newUUID() }

// Prompt sends text as one user message with a fresh uuid, only when no
// turn runs and no prompt holds the slot (busy otherwise): the CLI would
// queue or fold a second prompt into the running turn (DIGEST §7), and
// the controller's queue must stay the only queue. The receipt is
// acknowledged when the CLI reports the uuid queued (command_lifecycle);
// without that in CommandTimeout it is delivery-unknown. A prompt of
// which no byte reached the CLI (its stdin broke, engine.Stdin) is
// refused engine-gone with an empty Dispatch: it was not sent.
func (c *Conn) Prompt(ctx context.Context, text string) (engine.Dispatch, error) {
	if !utf8.ValidString(text) {
		return engine.Dispatch{}, protocol.Refuse(protocol.CodeMalformed, "prompt text is not valid UTF-8")
	}
	if err := engine.CheckText(text); err != nil {
		return engine.Dispatch{}, err
	}
	id := newUUID()
	c.mu.Lock()
	if err := c.tr.claim(id, text); err != nil {
		c.mu.Unlock()
		return engine.Dispatch{}, err
	}
	acked := c.tr.acked
	c.sent.Put(id, struct{}{})
	c.putAnnounced(id, promptSaid(text))
	c.mu.Unlock()

	err := c.send(map[string]any{
		"type": "user", "session_id": "", "parent_tool_use_id": nil, "uuid": id,
		"message": map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": text}}},
	})
	if err == nil {
		t := time.NewTimer(c.opts.CommandTimeout)
		defer t.Stop()
		select {
		case <-acked:
		case <-c.Done():
			err = engine.ErrClosed
		case <-t.C:
			err = fmt.Errorf("%w: no command_lifecycle for prompt %s", engine.ErrTimeout, id)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && engine.Unwritten(err) {
		// Not a byte reached the CLI (its stdin is broken): the prompt
		// was never sent, so it does not hold the slot, nor become the
		// last prompt released.
		c.sent.Delete(id)
		if s := c.tr.slot; s != nil && s.RequestID == id {
			c.tr.slot = nil
		}
		return engine.Dispatch{}, err
	}
	d := c.dispatch(id)
	if err != nil {
		if s := c.tr.slot; s != nil && s.RequestID == id && s.Receipt == engine.ReceiptPending {
			s.Receipt = protocol.ReceiptDeliveryUnknown
			d = *s
		}
		return d, protocol.Wrap(protocol.CodeDeliveryUnknown, err, "the engine may or may not hold the prompt")
	}
	return d, nil
}

// dispatch returns a copy of item id, held or last released; c.mu held.
func (c *Conn) dispatch(id string) engine.Dispatch {
	if s := c.tr.slot; s != nil && s.RequestID == id {
		return *s
	}
	if l := c.tr.last; l != nil && l.RequestID == id {
		return *l
	}
	return engine.Dispatch{RequestID: id}
}

// SentPrompt reports whether this Conn wrote a prompt with uuid id, among
// the latest maxAnnounced it wrote: the transcript's prompt line of each
// has that uuid (DIGEST §8), so a prompt line with another is some other
// writer's. The watch needs one only until its next polls find the line;
// an older one is forgotten (a line for it then would be refused: fail
// closed), so a long-running engine's prompts cost no memory past the
// bound.
func (c *Conn) SentPrompt(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sent.Get(id)
	return ok
}
