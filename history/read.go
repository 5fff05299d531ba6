package history

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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
			return nil, Replaced(path, "the session file is gone")
		}
		return newConversation(path), nil
	}
	defer src.f.Close()
	if prev != nil {
		if src.dev != prev.dev || src.ino != prev.ino {
			return nil, Replaced(path, "the session file is another file now")
		}
		if src.size < prev.size {
			return nil, Replaced(path, "the session file is shorter")
		}
	}
	s, err := scan(path, src, prev, opts.max(), opts.Project)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		s.idx = extend(prev.idx, s.records[s.appended:], s.nlines)
	}
	if s.idx == nil {
		s.idx = build(s.records, s.nlines)
	}
	return s, nil
}

// Replaced is the source-replaced refusal, with reconcile: the file read
// before is not the file now, so nothing read from it can be trusted.
func Replaced(path, why string) *protocol.Refusal {
	r := protocol.Refuse(protocol.CodeSourceReplaced, "%s: %s", path, why)
	r.Reconcile = true
	return r
}

func newConversation(path string) *Snapshot {
	s := &Snapshot{path: path, isNew: true}
	s.digest = sha256.Sum256(nil)
	s.idx = build(nil, 0)
	return s
}

// scan reads src. Without prev it reads the whole file, hashing its
// complete lines on a second goroutine while the light scan indexes them.
// With prev, the first prev.size bytes must be exactly prev's bytes
// (compared, not re-hashed: the running hash continues from prev's state),
// and only the bytes after them are read as new lines.
func scan(path string, src *source, prev *Snapshot, max int64, project string) (*Snapshot, error) {
	s := &Snapshot{path: path, dev: src.dev, ino: src.ino}
	h := sha256.New()
	var base int64
	line := 0
	if prev != nil {
		if err := samePrefix(path, src.f, prev); err != nil {
			return nil, err
		}
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(prev.hstate); err != nil {
			return nil, protocol.Wrap(protocol.CodeUnreadable, err, "resume the digest of %s", path)
		}
		base, line = prev.size, prev.nlines
		s.header, s.epoch = prev.header, prev.epoch
		s.records, s.unreadable = slices.Clip(prev.records), prev.unreadable
		s.chunks = slices.Clip(prev.chunks)
		s.lineage = append(slices.Clip(prev.lineage), mark{prev.size, prev.digest})
		if len(s.lineage) > maxLineage {
			s.lineage = s.lineage[len(s.lineage)-maxLineage:]
		}
		s.appended = len(s.records)
	}
	x := startHasher(h)
	data, err := readFrom(src.f, base, src.size, max, x.feed)
	close(x.feed)
	if err != nil {
		x.wait(nil)
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "read session file %s", path)
	}
	if base+int64(len(data)) > max {
		x.wait(nil)
		return nil, protocol.Refuse(protocol.CodeTooLarge, "session file %s grew over %d bytes", path, max)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	if end == 0 && prev == nil {
		x.wait(nil)
		return nil, incompleteHeader(path, data)
	}
	lines := keep(data, end)
	if err := s.takeLines(lines, line, prev == nil, path, project, x); err != nil {
		return nil, err
	}
	s.incomplete = end < len(data)
	if end > 0 {
		s.chunks = append(s.chunks, lines)
		s.fresh = lines
	}
	s.size = base + int64(end)
	h.Sum(s.digest[:0])
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "keep the digest of %s", path)
	}
	s.hstate = st
	if prev == nil {
		s.epoch = epoch(s.dev, s.ino, s.digest)
	}
	return s, nil
}

// keep returns the complete lines data[:end] as the snapshot keeps them:
// its chunk and its entries' lines stay as long as the follow chain does.
// readFrom's buffer has a page of room past the file's fstat size, and a
// half line may follow the lines: when that is more than the lines
// themselves, as after a follow that read one line, they are copied, so a
// chain of many small follows holds about what one Read of the file holds.
func keep(data []byte, end int) []byte {
	if cap(data) > 2*end {
		return bytes.Clone(data[:end])
	}
	return data[:end:end]
}

// splitMin is the size of new lines from which they are scanned in
// pieces on every CPU (beside the hash): below it a goroutine costs more
// than the pieces save.
const splitMin = 1 << 20

// scanPiece is about how much of a large read one goroutine scans at a
// time: small enough that the goroutines, the one that hashed first among
// them, end within a piece of each other.
const scanPiece = 256 << 10

// takeLines takes the complete lines of b, numbered after line; with
// header, the first is the session header. From splitMin bytes on, with
// more than one CPU, b is cut into pieces at line starts, each numbered by
// counting the LFs before it, and every CPU takes the next piece not taken
// yet: the hasher takes pieces once its hash is done, so the hash never
// waits for a scan to leave it a CPU and no CPU idles while pieces are
// left. takeLines returns once the hasher is done too.
func (s *Snapshot) takeLines(b []byte, line int, header bool, path, project string, x *hasher) error {
	cuts := pieces(b)
	runs := make([]lineRun, len(cuts)-1)
	starts := make([]int, len(cuts))
	starts[0] = line
	for k := 1; k < len(cuts); k++ {
		starts[k] = starts[k-1] + bytes.Count(b[cuts[k-1]:cuts[k]], []byte{'\n'})
	}
	var next atomic.Int64
	var left budget
	left.unreadable.Store(int64(maxUnreadable - s.unreadable))
	left.entries.Store(int64(maxEntries - (len(s.records) - s.unreadable)))
	work := func() {
		for {
			k := int(next.Add(1) - 1)
			if k >= len(runs) {
				return
			}
			piece := b[cuts[k]:cuts[k+1]]
			runs[k] = takeRun(piece, starts[k], starts[k+1]-starts[k], &left, header && k == 0, path, project)
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) - 2 {
		wg.Go(work)
	}
	x.wait(work)
	wg.Wait()
	if runs[0].err != nil {
		return runs[0].err
	}
	if header {
		s.header = runs[0].header
	}
	n, bad := 0, s.unreadable
	for _, r := range runs {
		n += len(r.records)
		bad += r.unreadable
	}
	if bad > maxUnreadable {
		return protocol.Refuse(protocol.CodeNotAPiSession, "session file %s holds more than %d lines that are not session entries: Pi writes none but a line torn by a crash, so another writer did; restore the file from a copy, or remove those lines", path, maxUnreadable)
	}
	if len(s.records)+n-bad > maxEntries {
		return protocol.Refuse(protocol.CodeTooLarge, "session file %s holds more than %d entries: start a new session (`mosaicctl conv rm` of this conversation, then `mosaicctl conv add` with a new --session file name)", path, maxEntries)
	}
	s.unreadable = bad
	s.records = slices.Grow(s.records, n)
	for _, r := range runs {
		s.records = append(s.records, r.records...)
	}
	s.nlines = starts[len(starts)-1]
	return nil
}

// pieces returns where b's pieces start, and len(b) last: one piece, or
// pieces of about scanPiece bytes each starting after an LF when b is
// worth splitting.
func pieces(b []byte) []int {
	cuts := []int{0}
	if len(b) >= splitMin && runtime.GOMAXPROCS(0) >= 2 {
		for at := scanPiece; at < len(b); {
			i := bytes.IndexByte(b[at:], '\n')
			if i < 0 || at+i+1 == len(b) {
				break
			}
			cuts = append(cuts, at+i+1)
			at += i + 1 + scanPiece
		}
	}
	return append(cuts, len(b))
}

// hasher takes the SHA-256 of a read's complete lines on its own
// goroutine, piece by piece as the read brings them in, so the hash
// (which takes longer than the read) starts with the read's first piece
// rather than after its last. Bytes after the last LF so far are held
// until an LF completes their line: the digest covers exactly the
// snapshot's lines, as one write of them would. Then the hasher helps
// scan the lines (wait).
type hasher struct {
	h    hash.Hash
	feed chan []byte // the bytes of each read, in file order; closed after the last
	work chan func() // what the hasher does once the hash is done
	done sync.WaitGroup
}

func startHasher(h hash.Hash) *hasher {
	x := &hasher{h: h, feed: make(chan []byte, 16), work: make(chan func(), 1)}
	x.done.Go(func() {
		var held [][]byte
		for b := range x.feed {
			i := bytes.LastIndexByte(b, '\n')
			if i < 0 {
				held = append(held, b)
				continue
			}
			for _, p := range held {
				x.h.Write(p)
			}
			held = held[:0]
			x.h.Write(b[:i+1])
			if i+1 < len(b) {
				held = append(held, b[i+1:])
			}
		}
		if work := <-x.work; work != nil {
			work()
		}
	})
	return x
}

// wait hands work (nil for none) to the hasher for after its hash, runs
// work too, and returns once the hasher is done. The read must be over
// (feed closed).
func (x *hasher) wait(work func()) {
	x.work <- work
	if work != nil {
		work()
	}
	x.done.Wait()
}

// lineRun is what a run of complete lines held.
type lineRun struct {
	records    []*record
	unreadable int // records that are not entries
	header     Header
	err        error
}

// slabMax bounds how many light-scanned lines' records and entries
// takeRun allocates at once: sized by the run's line count alone, a run of
// lines that are not entries ("1\n" a tool appends to its own session
// file) made 160 bytes of slab for every 2 bytes of file.
const slabMax = 1024

// minEntryLine is the length of the shortest line that can be an entry,
// `{"id":"a","type":""}`.
const minEntryLine = 20

// maxUnreadable is how many lines that are not entries (malformed lines,
// second headers) a session file may hold. Pi writes none, but a line
// torn by a crash, so a file with more was written by someone else; each
// is a notice kept with the snapshot, and without a bound a tool
// appending short such lines to its own session file made the
// controller keep about 80 times the file in memory.
const maxUnreadable = 1024

// maxEntries is how many entries a session file may hold. An entry costs
// the controller about 330 bytes for as few as 20 in the file (its
// record, its slab slot, its place in the tree; 13.5 times the bytes of
// short ones, measured), so a tool appending the shortest entries to its
// own session file could make a read of the 256 MiB it may grow to hold
// 3.4 GB before the session watch saw another writer. A million entries
// is about 330 MB; Pi's entries carry messages and tool results, and a
// session of 256 MiB holds far fewer.
const maxEntries = 1 << 20

// budget is what the runs of one read may still take: lines that are not
// entries, and entries (maxUnreadable and maxEntries less what the
// snapshot followed holds).
type budget struct{ unreadable, entries atomic.Int64 }

// takeRun scans the complete lines of b, numbered after line; with header,
// the first is the session header. b holds n LFs. The light-scanned
// lines' records and entries are allocated together, up to slabMax at
// once. Each line takes one from left, which the runs of one read share:
// a run stops once a bound is used up (too many for the file: takeLines
// refuses it).
func takeRun(b []byte, line, n int, left *budget, header bool, path, project string) lineRun {
	run := lineRun{records: make([]*record, 0, min(n, len(b)/minEntryLine+maxUnreadable))}
	var slab []taken
	var last string
	for more := n; len(b) > 0; more-- {
		i := bytes.IndexByte(b, '\n')
		body := b[:i]
		b = b[i+1:]
		line++
		if len(slab) == 0 {
			slab = make([]taken, min(more, slabMax))
		}
		if header && line == 1 {
			hd, err := parseHeader(body, path)
			if err != nil {
				return lineRun{err: err}
			}
			if project != "" {
				if err := checkCwd(hd, project, path); err != nil {
					return lineRun{err: err}
				}
			}
			run.header = hd
			continue
		}
		if rec := lightRecord(line, body, last, &slab[0]); rec != nil {
			if rec == &slab[0].r {
				slab = slab[1:]
			}
			run.records = append(run.records, rec)
			if rec.e != nil {
				last = rec.e.id
				if left.entries.Add(-1) < 0 {
					return run
				}
			} else if run.unreadable++; left.unreadable.Add(-1) < 0 {
				return run
			}
		}
	}
	return run
}

// samePrefix checks that f begins with exactly prev's bytes, reading them
// in pieces and comparing them with the ones prev kept (one chunk per
// snapshot of the chain, so a piece may span many): a rewrite in place
// anywhere in the prefix, or a truncation under it, is source-replaced.
func samePrefix(path string, f *os.File, prev *Snapshot) error {
	buf := make([]byte, min(prefixPiece, prev.size))
	chunks := prev.chunks
	var kept []byte
	for off := int64(0); off < prev.size; {
		n := int(min(int64(len(buf)), prev.size-off))
		got, err := f.ReadAt(buf[:n], off)
		if got < n {
			if err == nil || errors.Is(err, io.EOF) {
				return Replaced(path, "the session file is shorter")
			}
			return protocol.Wrap(protocol.CodeUnreadable, err, "read session file %s", path)
		}
		for b := buf[:n]; len(b) > 0; {
			for len(kept) == 0 {
				if len(chunks) == 0 {
					return Replaced(path, "the snapshot followed does not hold its own bytes")
				}
				kept, chunks = chunks[0], chunks[1:]
			}
			k := min(len(b), len(kept))
			if !bytes.Equal(b[:k], kept[:k]) {
				return Replaced(path, "the session file was rewritten in place")
			}
			b, kept = b[k:], kept[k:]
		}
		off += int64(n)
	}
	return nil
}

// readPiece is how much one read of new bytes takes: the hasher starts on
// the first piece while the rest is read.
const readPiece = 1 << 20

// prefixPiece is how much of the prefix one read compares.
const prefixPiece = 64 << 10

// readFrom reads f from off to its end, at most max+1-off bytes (one more
// than may be kept, so a file over max is seen), at most readPiece bytes
// a read, and sends the bytes of each read to feed. size is the fstat
// size, a hint: the file may still grow.
func readFrom(f *os.File, off, size, max int64, feed chan<- []byte) ([]byte, error) {
	limit := max + 1 - off
	if limit <= 0 {
		return nil, nil
	}
	hint := size - off
	if hint < 0 {
		hint = 0
	}
	buf := make([]byte, 0, min(hint+4096, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf))+1<<20, limit)-int64(len(buf))))
		}
		room := buf[len(buf):cap(buf)]
		if int64(len(room)) > limit-int64(len(buf)) {
			room = room[:limit-int64(len(buf))]
		}
		n, err := f.ReadAt(room[:min(len(room), readPiece)], off+int64(len(buf)))
		if n > 0 {
			feed <- room[:n:n]
		}
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
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
