package controller

import (
	"container/list"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Cursor bounds (seed 003 "Snapshots, epochs, cursors"): an LRU of 1000
// live cursors, each valid for 10 minutes.
const (
	maxCursors = 1000
	cursorTTL  = 10 * time.Minute
)

// pager is one read of a conversation's default branch (a Pi snapshot's
// branch, a Claude view) whose parts are numbered across the branch:
// the pages it encodes, each ending where the one after it begins, meet
// without gap or overlap whatever the engine appended since the read.
type pager interface {
	// parts is the number of parts of the branch.
	parts() (int, error)
	// pageBefore encodes the page ending before part end, as many parts
	// as the page caps hold, and returns the index of its first part.
	pageBefore(end int) ([]byte, int, error)
}

// pageCursor is where a connection stands when paging back: the view it
// read and the first part of the page it holds. It is bound to the
// connection (the actor's one view) and expires.
type pageCursor struct {
	id      string
	conn    string
	view    pager
	end     int // the page to read ends before this part
	expires time.Time
	elem    *list.Element
}

// cursors holds the live page cursors, least recently used first out. A
// fresh observe drops the connection's earlier cursors, so the snapshots
// kept are at most one per connection.
type cursors struct {
	mu  sync.Mutex
	m   map[string]*pageCursor
	lru *list.List
}

func newCursors() *cursors { return &cursors{m: map[string]*pageCursor{}, lru: list.New()} }

// issue returns a new cursor id for reading the page of v before part
// end, evicting the least recently used beyond the bound.
func (cs *cursors) issue(conn string, v pager, end int) string {
	pc := &pageCursor{conn: conn, view: v, end: end}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	pc.id, pc.expires = newID("hc-"), time.Now().Add(cursorTTL)
	pc.elem = cs.lru.PushBack(pc)
	cs.m[pc.id] = pc
	for cs.lru.Len() > maxCursors {
		cs.remove(cs.lru.Front().Value.(*pageCursor))
	}
	return pc.id
}

// use returns conn's cursor id. A foreign attempt does not consume it.
func (cs *cursors) use(conn, id string) (*pageCursor, *protocol.Refusal) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	pc := cs.m[id]
	var r *protocol.Refusal
	switch {
	case pc == nil:
		r = protocol.Refuse(protocol.CodeCursorUnknown, "cursor %q is unknown: never issued, replaced by a later observe on this connection, or evicted; observe again", cut(id))
	case pc.conn != conn:
		r = protocol.Refuse(protocol.CodeCursorForeign, "cursor %q was issued to another connection", cut(id))
	case time.Now().After(pc.expires):
		cs.remove(pc)
		r = protocol.Refuse(protocol.CodeCursorExpired, "cursor %q expired; observe again", cut(id))
	default:
		cs.lru.MoveToBack(pc.elem)
		return pc, nil
	}
	r.Reconcile = true
	return nil, r
}

// drop forgets every cursor of conn.
func (cs *cursors) drop(conn string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, pc := range cs.m {
		if pc.conn == conn {
			cs.remove(pc)
		}
	}
}

func (cs *cursors) remove(pc *pageCursor) {
	cs.lru.Remove(pc.elem)
	delete(cs.m, pc.id)
}

// cut bounds a client-chosen string quoted in a refusal.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
