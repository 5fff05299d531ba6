package controller

import (
	"container/list"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Cursor bounds (seed 003 "Snapshots, epochs, cursors"): an LRU of 1000
// live cursors, each valid for 10 minutes.
const (
	maxCursors = 1000
	cursorTTL  = 10 * time.Minute
)

// pageCursor is where a connection stands when paging back: the snapshot
// it read, the branch, and the first part of the page it holds. It is
// bound to the connection (the actor's one view) and expires.
type pageCursor struct {
	id      string
	conn    string
	snap    *history.Snapshot
	claude  *claudeView // a Claude conversation's view, instead of snap
	branch  string
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

// issue returns a new cursor id for reading the page before part end.
func (cs *cursors) issue(conn string, snap *history.Snapshot, branch string, end int) string {
	return cs.push(&pageCursor{conn: conn, snap: snap, branch: branch, end: end})
}

// push keeps pc as a new cursor (id and expiry set here) and returns its
// id, evicting the least recently used beyond the bound.
func (cs *cursors) push(pc *pageCursor) string {
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
