package controller

import (
	"os"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// sessionHead is what the controller pins of a session file before launch:
// the header id (the native session identity) and Pi's default leaf, the
// last entry in file order (session-manager.js _buildIndex), from one
// history snapshot, which the foreign-writer watch then follows.
type sessionHead struct {
	exists bool
	id     string
	leaf   string
	snap   *history.Snapshot // nil for an empty file
}

// has reports whether id is an entry of the pinned file.
func (h sessionHead) has(id string) bool { return h.snap != nil && h.snap.Has(id) }

// readSessionHead reads the session file read-only with the history
// reader (safe open: no symlink, a regular file, (dev, ino) rechecked;
// a Pi v3 header). A missing file is a new conversation, and so is an
// empty one: Pi gives it a header at start, so there is nothing to pin.
func readSessionHead(path string) (sessionHead, error) {
	snap, err := history.Read(path, history.Options{})
	if protocol.CodeOf(err) == protocol.CodeIncompleteHeader && emptyFile(path) {
		return sessionHead{}, nil
	}
	if err != nil {
		return sessionHead{}, err
	}
	if snap.New() {
		return sessionHead{snap: snap}, nil
	}
	h := sessionHead{exists: true, id: snap.SessionID(), leaf: snap.LeafID(), snap: snap}
	// The session's id and its leaf's are carried into every record that
	// names them (the binding, confirmations, eligibility, the claim, the
	// audit): one of any length would make each of those as long.
	for _, id := range []string{h.id, h.leaf} {
		if id != "" && !history.PlainID(id) {
			return sessionHead{}, protocol.Refuse(protocol.CodeUnreadable, "session file %s names its session or its leaf %.64q, not an id Pi writes (at most 128 letters, digits and . _ : -): the file was written by something else", path, id)
		}
	}
	return h, nil
}

// emptyFile reports a regular file of zero bytes at path (not followed).
func emptyFile(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == 0
}
