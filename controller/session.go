package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/history"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
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
	// transcript is a Claude conversation's transcript as read, nil for
	// a new session (and for Pi).
	transcript *hclaude.Transcript
}

// sessionBytes is a session file's bytes as one read covered them: Pi's
// snapshot or a Claude transcript.
type sessionBytes interface {
	Size() int64
	Digest() string
	Begins(size int64, digest string) bool
	Incomplete() bool
}

// bytes is what head's read covered, nil for an empty or missing file.
func (h sessionHead) bytes() sessionBytes {
	switch {
	case h.snap != nil:
		return h.snap
	case h.transcript != nil:
		return h.transcript
	}
	return nil
}

// ofSnap is snap as sessionBytes: nil for a nil snap, never an interface
// holding a nil pointer.
func ofSnap(snap *history.Snapshot) sessionBytes {
	if snap == nil {
		return nil
	}
	return snap
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

// fileState names b's bytes as a stopped revision records them
// (claims.Record.Vouched); nil is an empty or missing file, no bytes.
func fileState(b sessionBytes) *claims.FileState {
	if b == nil {
		return &claims.FileState{Size: 0, SHA256: emptySHA256}
	}
	return &claims.FileState{Size: b.Size(), SHA256: b.Digest()}
}

// emptySHA256 is the digest of no bytes.
var emptySHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// How the session file differs from what the stopped revision vouched for
// (historyChange).
const (
	historySame      = ""
	historyAppended  = "appended"  // it begins with the vouched bytes and holds more
	historyRewritten = "rewritten" // it no longer begins with them: changed in place, shortened or replaced
)

// historyChange says how the session file, as head read it, differs from
// the bytes rec vouched for; historySame when it does not, or when rec
// recorded none (an older claim): then the header and leaf checks are
// all there is, as before. A line being appended without its LF yet
// counts as appended: Pi loads a last line without one too, and the
// Claude CLI is still writing it.
func historyChange(rec *claims.Record, head sessionHead) string {
	v := rec.Vouched
	if v == nil {
		return historySame
	}
	snap := head.bytes()
	if snap == nil {
		// An empty or missing file: no bytes.
		if v.Size == 0 && v.SHA256 == emptySHA256 {
			return historySame
		}
		return historyRewritten
	}
	switch {
	case !snap.Begins(v.Size, v.SHA256):
		return historyRewritten
	case snap.Size() > v.Size || snap.Incomplete():
		return historyAppended
	}
	return historySame
}

// describeChange says what a change is, for the journal, refusals and
// intents: the sizes, and the digests cut to 12 hex digits.
func describeChange(rec *claims.Record, head sessionHead, change string) string {
	b := head.bytes()
	now := fileState(b)
	tail := ""
	if b != nil && b.Incomplete() {
		tail = " and a line without its LF"
	}
	if change == historyAppended {
		return fmt.Sprintf("the session file holds %d bytes%s after the %d the stop recorded (sha256 %s)",
			now.Size-rec.Vouched.Size, tail, rec.Vouched.Size, cutHex(rec.Vouched.SHA256))
	}
	return fmt.Sprintf("the session file no longer begins with the %d bytes the stop recorded (sha256 %s): it holds %d bytes, sha256 %s%s",
		rec.Vouched.Size, cutHex(rec.Vouched.SHA256), now.Size, cutHex(now.SHA256), tail)
}
