package claude

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/mosaic-agents/mosaic/history"
)

// ReadPrefix reads the first size bytes of the transcript ref names, as
// an earlier read covered them (its Size and Digest): what a controller
// vouched for, read again without what was appended since, so that a
// watch starting from it checks the rest. They must be exactly the bytes
// digest (lowercase hex SHA-256) names and end with a whole line;
// otherwise (the file shorter, rewritten, replaced or gone) it refuses
// source-replaced. A size of 0 is a new session: nothing was vouched
// for, and a follow reads the whole file as appended.
func ReadPrefix(ref Ref, size int64, digest string) (*Transcript, error) {
	if size == 0 && digest == (&Transcript{}).Digest() {
		return Empty(ref)
	}
	path, err := ref.Path()
	if err != nil {
		return nil, err
	}
	f, err := history.OpenRead(path, history.DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, history.Replaced(path, "the transcript is gone")
	}
	defer f.Close()
	t := blank(ref, path)
	if err := t.identify(f); err != nil {
		return nil, err
	}
	if size < 0 || size > history.DefaultMaxSize {
		return nil, history.Replaced(path, "the vouched size is out of range")
	}
	if err := t.scanUpTo(f, sha256.New(), size); err != nil {
		if !holds(f, size, digest) {
			// Changed in place: named as such, not by the line it broke.
			return nil, history.Replaced(path, "the transcript no longer begins with the bytes vouched for")
		}
		return nil, err
	}
	if t.size != size || t.partial || t.Digest() != digest {
		return nil, history.Replaced(path, "the transcript no longer begins with the bytes vouched for")
	}
	return t, nil
}

// holds reports whether f begins with size bytes whose SHA-256 is digest.
func holds(f *os.File, size int64, digest string) bool {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false
	}
	h := sha256.New()
	n, err := io.CopyN(h, f, size)
	return n == size && (err == nil || err == io.EOF) && hex.EncodeToString(h.Sum(nil)) == digest
}

// Before is the size and SHA-256 (lowercase hex) of the bytes before
// line n (1-based, as Entry.Line counts) of the read t: a prefix of it
// that ends with a whole line. ok is false when the file no longer holds
// exactly the bytes t parsed (another inode, changed in place), or t has
// fewer lines: the bytes are hashed from the file again, since the
// transcript keeps no copy of them.
func (t *Transcript) Before(n int) (size int64, digest string, ok bool) {
	if n < 1 || n > t.lines || t.isNew {
		return 0, "", false
	}
	f, ok := t.reopen()
	if !ok {
		return 0, "", false
	}
	defer f.Close()
	whole, prefix := sha256.New(), sha256.New()
	r := bufio.NewReader(io.LimitReader(f, t.size))
	for line := 1; ; line++ {
		b, err := r.ReadSlice('\n')
		if line < n {
			prefix.Write(b)
			size += int64(len(b))
		}
		whole.Write(b)
		if err == bufio.ErrBufferFull {
			line-- // the same line goes on
			continue
		}
		if err != nil {
			break
		}
	}
	if !bytes.Equal(whole.Sum(nil), t.digest) {
		return 0, "", false
	}
	return size, hex.EncodeToString(prefix.Sum(nil)), true
}
