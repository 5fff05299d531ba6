package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// newChain drops the history read back and starts over from the page the
// transcript holds now, whose older neighbour cursor reads.
func (a *attacher) newChain(cursor string) {
	a.older, a.cursor, a.stale = terminal.Older{}, cursor, true
	a.chain++
}

// pageBack reads the page before the oldest one shown, in the background:
// the marker at the top says it is loading, and the page is prepended
// when it comes (the Screen keeps the rows the reader is looking at). A
// cursor refused as unknown, expired or foreign re-reads the newest page,
// as Ctrl-O does, since the chain cannot be continued.
func (a *attacher) pageBack() {
	if a.older.Loading || a.cursor == "" {
		return // already reading, or the beginning is shown
	}
	c := a.online("older history")
	if c == nil {
		return
	}
	cursor, chain := a.cursor, a.chain
	a.older.Loading, a.stale = true, true
	a.async(func(ctx context.Context) func() {
		p, next, err := olderPage(ctx, c, cursor)
		return func() {
			if chain != a.chain {
				return // a fresh page replaced the chain meanwhile
			}
			a.older.Loading, a.stale = false, true
			switch code := protocol.CodeOf(err); {
			case err == nil:
				a.older.Prepend(p)
				a.cursor = next
			case code == protocol.CodeCursorUnknown || code == protocol.CodeCursorExpired || code == protocol.CodeCursorForeign:
				a.reconnect()
				a.scr.SetNotice(fmt.Sprintf("older history refused (%s): re-reading from the newest page", code))
			default:
				a.noticeOf("older history", err)()
			}
		}
	})
}

// olderPage reads and decodes the page before cursor's, and the cursor
// of the page before that ("" at the beginning).
func olderPage(ctx context.Context, c *client.Client, cursor string) (*history.Page, string, error) {
	r, err := c.OlderPage(ctx, cursor)
	if err != nil {
		return nil, "", err
	}
	var p history.Page
	if err := json.Unmarshal(r.History, &p); err != nil {
		return nil, "", fmt.Errorf("older history: decode page: %w", err)
	}
	return &p, r.Cursor, nil
}
