package claude

import (
	"bytes"
	"crypto/sha256"
	"io"
	"maps"
	"slices"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Follow reads prev's transcript again, parsing only what was appended
// since prev was read. The file must be the same one (device and inode),
// not shorter, and begin with exactly the bytes prev read (their SHA-256,
// hashed again from the file): otherwise it refuses source-replaced, since
// every entry prev vouched for may have changed. What Follow returns is
// what Read would return for the file now. A prev of a new session is
// read afresh; one whose last line had no LF yet is checked the same way
// and then parsed again from the start (its half line is not kept).
//
// The prefix is hashed rather than parsed again: the watch of a transcript
// an engine keeps rewriting then costs one hash of the file per change,
// not a JSON parse of every line.
func Follow(prev *Transcript) (*Transcript, error) {
	if prev.isNew {
		return Read(prev.ref)
	}
	f, err := history.OpenRead(prev.path, history.DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, history.Replaced(prev.path, "the transcript is gone")
	}
	defer f.Close()
	t := blank(prev.ref, prev.path)
	if err := t.identify(f); err != nil {
		return nil, err
	}
	if t.dev != prev.dev || t.ino != prev.ino {
		return nil, history.Replaced(prev.path, "the transcript is another file now")
	}
	h := sha256.New()
	switch n, err := io.CopyN(h, f, prev.size); {
	case n < prev.size && (err == nil || err == io.EOF):
		return nil, history.Replaced(prev.path, "the transcript is shorter")
	case err != nil:
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "read claude transcript %s", prev.path)
	}
	if !bytes.Equal(h.Sum(nil), prev.digest) {
		return nil, history.Replaced(prev.path, "the transcript was rewritten in place")
	}
	if prev.partial {
		// The half line may continue in what was appended: parse the
		// file again, checked above, from its first byte.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, protocol.Wrap(protocol.CodeUnreadable, err, "read claude transcript %s", prev.path)
		}
		return t, t.scan(f, sha256.New())
	}
	t = prev.next()
	return t, t.scan(f, h)
}

// next is a copy of t that lines read after t's can be added to without
// changing t: entries are never modified once added, so they are shared.
func (t *Transcript) next() *Transcript {
	n := *t
	n.entries, n.kids = maps.Clone(t.entries), maps.Clone(t.kids)
	n.order, n.side = slices.Clip(t.order), slices.Clip(t.side)
	return &n
}
