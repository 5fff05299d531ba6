package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/shape"
	"github.com/mosaic-agents/mosaic/proofs"
)

// Errors carried (via errors.Is) by failures of this package.
var (
	// ErrRevisionExists is the exclusive create losing: that revision of
	// the item was written first by another writer.
	ErrRevisionExists = errors.New("queue item revision already exists")
	// ErrInvalid is a malformed argument.
	ErrInvalid = errors.New("invalid queue argument")
	// ErrTooLarge is a revision larger than Load reads back: Write
	// refuses it before anything reaches the disk.
	ErrTooLarge = errors.New("queue item revision too large")
	// ErrTooMany is a queue directory with more entries than Load reads:
	// more than the controller's retention ever leaves.
	ErrTooMany = errors.New("queue directory holds too many entries")
)

// MaxRevisionBytes bounds one revision file, written (Write) and read
// (Load) alike: a prompt is at most 262144 characters (1.5 MiB once
// JSON-escaped), and the controller bounds an item's edits so that every
// payload fits.
const MaxRevisionBytes = 32 << 20

// maxEntries bounds the entries of a queue directory Load reads: the
// controller keeps at most 64 waiting, 1024 finished and 256 draft items.
const maxEntries = 4096

// validItem reports whether id has the shape of an item id: 1 to 4
// lowercase letters, a dash, 8 to 64 lowercase hex digits.
func validItem(id string) bool {
	kind, digits, ok := strings.Cut(id, "-")
	return ok && shape.Token(kind, 1, 4, shape.Lower, shape.Lower) && shape.Token(digits, 8, 64, shape.LowerHex, shape.LowerHex)
}

func revisionFile(rev int) string { return fmt.Sprintf("r%010d.json", rev) }

// Store is the queue of one conversation on disk.
type Store struct {
	dir   string
	fault atomicfile.Fault
}

// Option configures a Store.
type Option func(*Store)

// WithFault installs a fault hook (tests only): it sees every fault point
// of every revision write (atomicfile's points).
func WithFault(f atomicfile.Fault) Option { return func(s *Store) { s.fault = f } }

// Open returns the queue of conversation under root (the directory that
// holds every conversation's queue), creating it 0700 if needed. The
// conversation id never becomes a path component: its SHA-256 does.
func Open(root, conversation string, opts ...Option) (*Store, error) {
	if !filepath.IsAbs(root) || conversation == "" {
		return nil, fmt.Errorf("queue root %q for conversation %q: %w", root, conversation, ErrInvalid)
	}
	sum := sha256.Sum256([]byte(conversation))
	s := &Store{dir: filepath.Join(filepath.Clean(root), hex.EncodeToString(sum[:]))}
	for _, o := range opts {
		o(s)
	}
	if err := atomicfile.MakeDir(s.dir, filepath.Dir(s.dir)); err != nil {
		return nil, fmt.Errorf("open queue: %w", err)
	}
	return s, nil
}

// Dir is the conversation's queue directory.
func (s *Store) Dir() string { return s.dir }

// Write publishes it as revision it.Revision of its item, write-once. The
// revision before it must exist (except for revision 1): revisions stay a
// gapless run.
func (s *Store) Write(it Item) error {
	if !validItem(it.ID) || it.Revision < 1 {
		return fmt.Errorf("write item %q revision %d: %w", it.ID, it.Revision, ErrInvalid)
	}
	dir := filepath.Join(s.dir, it.ID)
	if it.Revision == 1 {
		if err := atomicfile.MakeDir(dir, s.dir); err != nil {
			return fmt.Errorf("queue item %s: %w", it.ID, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, revisionFile(it.Revision-1))); err != nil {
		return fmt.Errorf("write item %s revision %d: the revision before it: %w", it.ID, it.Revision, err)
	}
	data, err := proofs.Canonical(it)
	if err != nil {
		return fmt.Errorf("encode item %s revision %d: %w", it.ID, it.Revision, err)
	}
	if len(data)+1 > MaxRevisionBytes {
		return fmt.Errorf("item %s revision %d is %d bytes, over %d: %w", it.ID, it.Revision, len(data)+1, MaxRevisionBytes, ErrTooLarge)
	}
	err = atomicfile.WriteOnce(filepath.Join(dir, revisionFile(it.Revision)), append(data, '\n'), s.fault)
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("item %s revision %d: %w", it.ID, it.Revision, ErrRevisionExists)
	}
	if err != nil {
		return fmt.Errorf("queue item %s revision %d: %w", it.ID, it.Revision, err)
	}
	return nil
}

// Read returns revision rev of item id as stored, checked like Load checks
// it; an absent revision is an error carrying fs.ErrNotExist. A writer
// whose Write failed reads back what the store holds: a failure after the
// link (the directory fsync) leaves the revision in place.
func (s *Store) Read(id string, rev int) (Item, error) {
	if !validItem(id) || rev < 1 {
		return Item{}, fmt.Errorf("read item %q revision %d: %w", id, rev, ErrInvalid)
	}
	it, err := readRevision(filepath.Join(s.dir, id, revisionFile(rev)))
	if err == nil {
		err = it.check(id, rev)
	}
	if err != nil {
		return Item{}, fmt.Errorf("read item %s revision %d: %w", id, rev, err)
	}
	return it, nil
}

// Damaged is an item whose revisions cannot be trusted: its text is never
// read from it.
type Damaged struct {
	ID     string
	Reason string
	// Last is the newest revision that did read whole, if any: its
	// lineage (request, actor) but never a basis for sending.
	Last *Item
}

// Load reads every item's current revision, in admission order, and the
// items it could not trust. An item directory with no revision at all (a
// crash between its creation and its first revision's link: nobody was
// told it was queued) is removed. More than maxEntries entries is an
// error: the directory is not one the controller's retention left.
func (s *Store) Load() ([]Item, []Damaged, error) {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read queue %q: %w", s.dir, err)
	}
	entries, err := d.ReadDir(maxEntries + 1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("read queue %q: %w", s.dir, err)
	}
	if len(entries) > maxEntries {
		return nil, nil, fmt.Errorf("read queue %q: more than %d entries: %w", s.dir, maxEntries, ErrTooMany)
	}
	var items []Item
	var damaged []Damaged
	for _, e := range entries {
		if !e.IsDir() || !validItem(e.Name()) {
			continue // temp files, items being forgotten
		}
		it, last, err := readItem(filepath.Join(s.dir, e.Name()), e.Name())
		if err != nil {
			damaged = append(damaged, Damaged{ID: e.Name(), Reason: err.Error(), Last: last})
			continue
		}
		if it != nil {
			items = append(items, *it)
		} else {
			os.RemoveAll(filepath.Join(s.dir, e.Name()))
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Seq < items[j].Seq })
	return items, damaged, nil
}

// readItem returns the current revision of an item directory (nil when it
// holds none yet: a crash before its first revision was linked), or why it
// is damaged with its newest good revision.
func readItem(dir, id string) (cur, last *Item, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read item: %w", err)
	}
	var revs []int
	for _, e := range entries {
		if d, ok := shape.Revision(e.Name()); ok {
			n, _ := strconv.Atoi(d)
			revs = append(revs, n)
		}
	}
	slices.Sort(revs)
	for i, n := range revs {
		if n != i+1 {
			return nil, last, fmt.Errorf("revision %d missing", i+1)
		}
		it, err := readRevision(filepath.Join(dir, revisionFile(n)))
		if err == nil {
			err = it.check(id, n)
		}
		if err != nil {
			return nil, last, fmt.Errorf("revision %d: %v", n, err)
		}
		last = &it
	}
	return last, nil, nil
}

func readRevision(path string) (Item, error) {
	var it Item
	f, err := os.Open(path)
	if err != nil {
		return it, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRevisionBytes+1))
	if err != nil {
		return it, err
	}
	if len(data) > MaxRevisionBytes {
		return it, fmt.Errorf("larger than %d bytes", MaxRevisionBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&it); err != nil {
		return it, fmt.Errorf("does not decode: %v", err)
	}
	if dec.More() {
		return it, errors.New("trailing data")
	}
	return it, nil
}

// Forget removes a finished item whole: its directory is renamed to a dot
// name no reader lists, removed, and the queue directory fsynced. A crash
// part way leaves the dot name, which the next Forget of anything sweeps.
func (s *Store) Forget(id string) error {
	if !validItem(id) {
		return fmt.Errorf("forget item %q: %w", id, ErrInvalid)
	}
	gone := filepath.Join(s.dir, ".gone-"+id)
	if err := os.Rename(filepath.Join(s.dir, id), gone); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget item %s: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.dir); err != nil {
		return fmt.Errorf("forget item %s: %w", id, err)
	}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if len(e.Name()) > 6 && e.Name()[:6] == ".gone-" {
			os.RemoveAll(filepath.Join(s.dir, e.Name()))
		}
	}
	return nil
}
