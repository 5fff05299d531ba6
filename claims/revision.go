package claims

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/shape"
	"github.com/mosaic-agents/mosaic/proofs"
)

// maxRevisionBytes bounds one revision file; a cohort proof of thousands of
// members fits with room to spare.
const maxRevisionBytes = 4 << 20

func revisionFile(rev uint64) string { return fmt.Sprintf("r%010d.json", rev) }

// slot is one key directory as read: every revision, in order.
type slot struct {
	dir  string
	kind string
	revs []Record
}

// current is the highest revision, nil for a key never claimed.
func (sl *slot) current() *Record {
	if len(sl.revs) == 0 {
		return nil
	}
	return &sl.revs[len(sl.revs)-1]
}

func (sl *slot) next() uint64 { return uint64(len(sl.revs)) + 1 }

// readSlot reads every revision of a key directory. A missing directory is
// a key never claimed. Anything that is not a complete run r1..rN of valid
// revisions is ErrCorrupt: a damaged newest revision must never let an
// older `stopped` one show through, and a gap means one was lost.
func readSlot(dir, kind string) (*slot, error) {
	sl := &slot{dir: dir, kind: kind}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return sl, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read claim key %q: %w", dir, err)
	}
	var revs []uint64
	for _, e := range entries {
		d, ok := shape.Revision(e.Name())
		if !ok {
			continue // temp files of writers, alive or crashed
		}
		n, _ := strconv.ParseUint(d, 10, 64)
		revs = append(revs, n)
	}
	slices.Sort(revs)
	hash := filepath.Base(dir)
	for i, n := range revs {
		if n != uint64(i)+1 {
			return nil, fmt.Errorf("claim key %q: revision %d missing: %w", dir, i+1, ErrCorrupt)
		}
		rec, err := readRevision(filepath.Join(dir, revisionFile(n)))
		if err != nil {
			return nil, err
		}
		if err := rec.check(kind, hash, n); err != nil {
			return nil, fmt.Errorf("revision %q: %v: %w", filepath.Join(dir, revisionFile(n)), err, ErrCorrupt)
		}
		sl.revs = append(sl.revs, rec)
	}
	return sl, nil
}

func readRevision(path string) (Record, error) {
	var rec Record
	f, err := os.Open(path)
	if err != nil {
		return rec, fmt.Errorf("open revision %q: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRevisionBytes+1))
	if err != nil {
		return rec, fmt.Errorf("read revision %q: %w", path, err)
	}
	if len(data) > maxRevisionBytes {
		return rec, fmt.Errorf("revision %q larger than %d bytes: %w", path, maxRevisionBytes, ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("decode revision %q: %v: %w", path, err, ErrCorrupt)
	}
	if dec.More() {
		return rec, fmt.Errorf("decode revision %q: trailing data: %w", path, ErrCorrupt)
	}
	return rec, nil
}

// publish writes rec as revision rec.Revision of dir, write-once
// (atomicfile.WriteOnce: temp file, fsync, link(2) to the final name, fsync
// of the directory). A final name therefore only ever names a complete
// revision, and never a second time.
func (s *Store) publish(dir string, rec Record) error {
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	data, err := proofs.Canonical(rec)
	if err != nil {
		return fmt.Errorf("encode revision %d of %q: %w", rec.Revision, dir, err)
	}
	data = append(data, '\n')
	final := filepath.Join(dir, revisionFile(rec.Revision))
	err = atomicfile.WriteOnce(final, data, atomicfile.Fault(s.hook))
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("create revision %q: %w", final, ErrRevisionExists)
	}
	if err != nil {
		return fmt.Errorf("revision %d of %q: %w", rec.Revision, dir, err)
	}
	return nil
}

// ensureDir creates a key directory and makes its creation durable by
// fsyncing each parent it had to create an entry in.
func (s *Store) ensureDir(dir string) error {
	if err := atomicfile.MakeDir(dir, s.root); err != nil {
		return fmt.Errorf("claim key: %w", err)
	}
	return nil
}
