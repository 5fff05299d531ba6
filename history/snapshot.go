package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// maxLineage bounds how many earlier snapshots of one follow chain a
// snapshot still recognises as its prefixes (for cursors issued on them).
const maxLineage = 1024

// mark is the identity of an earlier snapshot in the same follow chain.
type mark struct {
	size   int64
	digest [32]byte
}

// Snapshot is one immutable read of a session file: the bytes up to the
// last LF at read time, their SHA-256, the file's (dev, ino) and the
// parsed tree. It is safe for concurrent use; the controller keeps one and
// serves every observer's pages from it.
type Snapshot struct {
	path       string
	isNew      bool
	header     Header
	dev, ino   uint64
	size       int64
	nlines     int
	digest     [32]byte
	epoch      string
	incomplete bool
	records    []*record
	unreadable int // records that are not entries (at most maxUnreadable)
	appended   int // records[appended:] were parsed by this snapshot
	lineage    []mark
	chunks     [][]byte // the snapshot's bytes, for the next follow's prefix check
	fresh      []byte   // the complete lines this snapshot read (and hashed)
	hstate     []byte   // the SHA-256 state after them, for the next follow's digest
	idx        *index

	mu    sync.Mutex
	parts map[string]*cutting // branch -> its parts, cut as far as read
}

// New reports that there was no session file: a new conversation whose
// history is empty. Pi writes the file lazily, after the first assistant
// message.
func (s *Snapshot) New() bool { return s.isNew }

// Header returns line 1 (zero for a new conversation).
func (s *Snapshot) Header() Header { return s.header }

// SessionID is the header id the controller pins at launch and checks
// against get_state's sessionId (K8). Empty for a new conversation.
func (s *Snapshot) SessionID() string { return s.header.ID }

// LeafID is Pi's default leaf as Pi loads this file (the last valid entry
// in file order, session-manager.js _buildIndex), for the K8 check against
// get_tree's leafId. Empty when there is no entry.
func (s *Snapshot) LeafID() string {
	if s.idx.leaf == nil {
		return ""
	}
	return s.idx.leaf.id
}

// Has reports whether id is an entry of this snapshot.
func (s *Snapshot) Has(id string) bool { return s.idx.get(id) != nil }

// EntryIDs lists every entry id (native, unhashed) once, in the file order
// of the entry that wins for it.
func (s *Snapshot) EntryIDs() []string {
	var out []string
	for _, r := range s.records {
		if r.e != nil && s.idx.get(r.e.id) == r.e {
			out = append(out, r.e.id)
		}
	}
	return out
}

// Appended lists the ids of the entry lines this snapshot read beyond the
// snapshot it followed (all of them for a Read), in file order, repeats
// included. The controller compares them with the entry ids its own
// engine stream reported: one it never saw is a foreign writer (W10).
func (s *Snapshot) Appended() []string {
	var out []string
	for _, r := range s.records[s.appended:] {
		if r.e != nil {
			out = append(out, r.e.id)
		}
	}
	return out
}

// AppendedLines returns the complete lines this snapshot read beyond the
// snapshot it followed (the whole file for a Read, its header first),
// exactly as it read and hashed them: what the controller compares with
// the entries its engine holds, not a second read a writer could change
// back in between.
func (s *Snapshot) AppendedLines() [][]byte {
	var out [][]byte
	for l := range bytes.SplitSeq(s.fresh, []byte{'\n'}) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// Foreign returns the appended entry ids for which known is false.
func (s *Snapshot) Foreign(known func(id string) bool) []string {
	var out []string
	for _, id := range s.Appended() {
		if !known(id) {
			out = append(out, id)
		}
	}
	return out
}

// Incomplete reports a trailing line without LF, left out of the snapshot
// (Pi may be mid-append).
func (s *Snapshot) Incomplete() bool { return s.incomplete }

// Size is the number of bytes in the snapshot (up to the last LF).
func (s *Snapshot) Size() int64 { return s.size }

// Digest is the hex SHA-256 of the snapshot's bytes.
func (s *Snapshot) Digest() string { return hex.EncodeToString(s.digest[:]) }

// Begins reports whether the snapshot's bytes begin with exactly size
// bytes whose SHA-256 is digest (lowercase hex), as an earlier snapshot's
// Size and Digest named them: the file then only grew since (or is the
// same, when size is Size). The whole snapshot's digest is the read's
// own; a shorter prefix is hashed from the bytes the snapshot keeps, so
// the file is not read again.
func (s *Snapshot) Begins(size int64, digest string) bool {
	switch {
	case size < 0 || size > s.size:
		return false
	case size == s.size:
		return s.Digest() == digest
	}
	h := sha256.New()
	for _, c := range s.chunks {
		if size == 0 {
			break
		}
		n := min(int64(len(c)), size)
		h.Write(c[:n])
		size -= n
	}
	return size == 0 && hex.EncodeToString(h.Sum(nil)) == digest
}

// Epoch names the source file across follows: the same while every follow
// verified its prefix, different after a fresh Read of the same file.
// Comparable only within one follow chain.
func (s *Snapshot) Epoch() string { return s.epoch }

// DefaultBranch is the branch holding Pi's default leaf.
func (s *Snapshot) DefaultBranch() string { return s.idx.defaultBranch() }

// Branch describes one branch: its name and the entry it ends at.
type Branch struct {
	Name string `json:"name"`
	// Entry is the namespaced key of the branch's last entry (as in Part),
	// empty for an empty main; Tip is its native id.
	Entry string `json:"entry,omitempty"`
	Tip   string `json:"-"`
}

// Branches lists every branch, main first, then by first line.
func (s *Snapshot) Branches() []Branch {
	out := make([]Branch, 0, len(s.idx.order))
	for _, n := range s.idx.order {
		b := Branch{Name: n}
		if t := s.idx.tips[n]; t != nil {
			b.Entry, b.Tip = entryKey(t.id), t.id
		}
		out = append(out, b)
	}
	return out
}
