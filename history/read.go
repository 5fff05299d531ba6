package history

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Options tune a read. The zero value is the production setting.
type Options struct {
	// MaxSize overrides DefaultMaxSize (tests use a small one).
	MaxSize int64
	// Project, when set, makes Read refuse foreign-project unless the
	// header cwd is absolute and the project directory or inside it
	// (seed 003). Follow needs no check: the header is in the prefix.
	Project string
}

func (o Options) max() int64 {
	if o.MaxSize > 0 {
		return o.MaxSize
	}
	return DefaultMaxSize
}

// Read takes a snapshot of the session file at path: the file up to its
// last LF, parsed. A missing file is a new conversation: an empty snapshot
// with New set, not an error. Refusals are *protocol.Refusal with the
// seed's codes (unsafe-path, unreadable, too-large, not-a-pi-session,
// incomplete-header). Read never writes, creates or renames anything.
func Read(path string, opts Options) (*Snapshot, error) {
	return load(path, nil, opts)
}

// Follow takes a fresh snapshot that continues prev: the file must be the
// same (dev, ino), not shorter, and begin with exactly prev's bytes;
// otherwise it refuses source-replaced with reconcile. Only the appended
// lines are parsed; Appended lists the entry ids they hold. A nil prev, or
// a prev of a new conversation, reads afresh.
func Follow(path string, prev *Snapshot, opts Options) (*Snapshot, error) {
	return load(path, prev, opts)
}

func load(path string, prev *Snapshot, opts Options) (*Snapshot, error) {
	if prev != nil && prev.isNew {
		prev = nil
	}
	src, err := openSafe(path, opts.max())
	if err != nil {
		return nil, err
	}
	if src == nil {
		if prev != nil {
			return nil, replaced(path, "the session file is gone")
		}
		return newConversation(path), nil
	}
	defer src.f.Close()
	if prev != nil {
		if src.dev != prev.dev || src.ino != prev.ino {
			return nil, replaced(path, "the session file is another file now")
		}
		if src.size < prev.size {
			return nil, replaced(path, "the session file is shorter")
		}
	}
	s, err := scan(path, src, prev, opts.max(), opts.Project)
	if err != nil {
		return nil, err
	}
	s.idx = build(s.records)
	return s, nil
}

func replaced(path, why string) *protocol.Refusal {
	r := protocol.Refuse(protocol.CodeSourceReplaced, "%s: %s", path, why)
	r.Reconcile = true
	return r
}

func newConversation(path string) *Snapshot {
	s := &Snapshot{path: path, isNew: true}
	s.digest = sha256.Sum256(nil)
	s.idx = build(nil)
	return s
}

// scan reads src line by line, hashing every complete line. With prev, the
// first prev.size bytes must hash to prev's digest and end on a line
// boundary; their records are reused and only later lines are parsed.
func scan(path string, src *source, prev *Snapshot, max int64, project string) (*Snapshot, error) {
	s := &Snapshot{path: path, dev: src.dev, ino: src.ino}
	h := sha256.New()
	r := bufio.NewReaderSize(io.LimitReader(src.f, max+1), 1<<20)
	var off int64
	line := 0
	if prev != nil {
		s.header, s.epoch = prev.header, prev.epoch
		s.records = slices.Clip(prev.records)
		s.lineage = append(slices.Clip(prev.lineage), mark{prev.size, prev.digest})
		if len(s.lineage) > maxLineage {
			s.lineage = s.lineage[len(s.lineage)-maxLineage:]
		}
		s.appended = len(s.records)
	}
	var pending []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			pending = append(pending, chunk...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, protocol.Wrap(protocol.CodeUnreadable, err, "read session file %s", path)
		}
		b := chunk
		if len(pending) > 0 {
			pending = append(pending, chunk...)
			b = pending
		}
		if off+int64(len(b)) > max {
			return nil, protocol.Refuse(protocol.CodeTooLarge, "session file %s grew over %d bytes", path, max)
		}
		if err != nil { // EOF: b is a trailing partial line, left out
			if line == 0 && prev == nil {
				return nil, incompleteHeader(path, b)
			}
			s.incomplete = len(b) > 0
			break
		}
		h.Write(b)
		off += int64(len(b))
		line++
		body := b[:len(b)-1]
		switch {
		case prev != nil && off < prev.size:
		case prev != nil && off == prev.size:
			var d [32]byte
			h.Sum(d[:0])
			if d != prev.digest {
				return nil, replaced(path, "the session file was rewritten in place")
			}
		case prev != nil && off-int64(len(b)) < prev.size:
			return nil, replaced(path, "the session file was rewritten in place")
		case line == 1:
			hd, err := parseHeader(body, path)
			if err != nil {
				return nil, err
			}
			if project != "" {
				if err := checkCwd(hd, project, path); err != nil {
					return nil, err
				}
			}
			s.header = hd
		default:
			if rec := parseLine(line, body); rec != nil {
				s.records = append(s.records, rec)
			}
		}
		pending = pending[:0]
	}
	if prev != nil && off < prev.size {
		return nil, replaced(path, "the session file is shorter")
	}
	s.size, s.lines = off, line
	h.Sum(s.digest[:0])
	if prev == nil {
		s.epoch = epoch(s.dev, s.ino, s.digest)
	}
	return s, nil
}

// incompleteHeader refuses a file whose first line has no LF yet: Pi
// writes the header and the first entries in one go, so this is a file
// being created (reconcile), unless it is plainly not JSON.
func incompleteHeader(path string, b []byte) error {
	t := bytes.TrimLeft(b, " \t\r")
	if len(t) == 0 || t[0] == '{' {
		r := protocol.Refuse(protocol.CodeIncompleteHeader, "session file %s has no complete header line yet", path)
		r.Reconcile = true
		return r
	}
	return protocol.Refuse(protocol.CodeNotAPiSession, "line 1 of %s is not a session header", path)
}

// epoch names a source: the file identity and the digest at first open.
// Follows carry it forward while the prefix verifies.
func epoch(dev, ino uint64, digest [32]byte) string {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], dev)
	binary.BigEndian.PutUint64(b[8:], ino)
	h.Write(b[:])
	h.Write(digest[:])
	return fmt.Sprintf("e-%s", hex.EncodeToString(h.Sum(nil)[:16]))
}
