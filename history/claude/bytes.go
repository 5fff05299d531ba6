package claude

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/mosaic-agents/mosaic/history"
)

// The bytes a read covered, named as a stopped revision records them
// (claims.Record.Vouched) and compared by the wake and a recover: no
// engine runs while a conversation is stopped, so a transcript that no
// longer begins with the bytes the stop vouched for was changed by
// another writer.

// Size is the number of bytes the read covered (a last line without its
// LF included: Incomplete).
func (t *Transcript) Size() int64 { return t.size }

// Digest is the lowercase hex SHA-256 of the bytes the read covered.
func (t *Transcript) Digest() string {
	if t.digest == nil {
		return hex.EncodeToString(sha256.New().Sum(nil))
	}
	return hex.EncodeToString(t.digest)
}

// Incomplete says the read's last line had no LF yet.
func (t *Transcript) Incomplete() bool { return t.partial }

// Begins reports whether the bytes the read covered begin with exactly
// size bytes whose SHA-256 is digest (lowercase hex), as an earlier
// read's Size and Digest named them. The whole read's digest is its own;
// a shorter prefix is hashed from the file again, and counts only when
// the file still holds, in the same inode, exactly the bytes this read
// parsed (their digest): the transcript keeps no copy of them.
func (t *Transcript) Begins(size int64, digest string) bool {
	switch {
	case size < 0 || size > t.size:
		return false
	case size == t.size:
		return t.Digest() == digest
	}
	f, ok := t.reopen()
	if !ok {
		return false
	}
	defer f.Close()
	whole, prefix := sha256.New(), sha256.New()
	if n, err := io.CopyN(io.MultiWriter(whole, prefix), f, size); n != size || err != nil {
		return false
	}
	if n, err := io.CopyN(whole, f, t.size-size); n != t.size-size || err != nil {
		return false
	}
	return bytes.Equal(whole.Sum(nil), t.digest) && hex.EncodeToString(prefix.Sum(nil)) == digest
}

// reopen opens the file t read again, if it is still the same one (device
// and inode): what Begins and Before hash the read's bytes from.
func (t *Transcript) reopen() (*os.File, bool) {
	f, err := history.OpenRead(t.path, history.DefaultMaxSize)
	if err != nil || f == nil {
		return nil, false
	}
	again := blank(t.ref, t.path)
	if again.identify(f) != nil || again.dev != t.dev || again.ino != t.ino {
		f.Close()
		return nil, false
	}
	return f, true
}

// Inode is the inode number of the file the read covered (0 for a new
// session): a watch that starts from the read tells a file replaced since.
func (t *Transcript) Inode() uint64 { return t.ino }
