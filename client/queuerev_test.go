package client

import (
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// A command's reply carries the queue as it was at its commit; a broadcast
// of a later revision may arrive first. The client must keep the later one.
func TestQueueNeverGoesBack(t *testing.T) {
	c := &Client{}
	c.note(&Update{Queue: &protocol.Queue{Revision: 5}})
	c.note(&Update{Queue: &protocol.Queue{Revision: 4, Request: "e1"}})
	if got := c.state.Queue.Revision; got != 5 {
		t.Fatalf("after a reply with revision 4 the client holds revision %d; want 5", got)
	}
	c.note(&Update{Queue: &protocol.Queue{Revision: 6, Request: "e2"}})
	if got := c.state.Queue.Revision; got != 6 {
		t.Fatalf("a newer reply was not taken: revision %d", got)
	}
}
